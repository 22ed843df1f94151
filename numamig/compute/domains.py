"""This host's domains as operators see them: listing, and deletion.

Listing returns every domain the hypervisor has, numamig's or not, with
its live and persistent XML, so that an audit also finds the pins of
guests nobody recorded. Deletion destroys a guest and releases its
usage here; the conductor removes the record afterwards.
"""

from oslo_log import log as logging

from numamig import exception
from numamig.compute import report

LOG = logging.getLogger(__name__)


def list_domains(agent):
    """Every domain on this host with its XML.

    :returns: a list of dicts: uuid, name, live_xml, persistent_xml and
        error (why an XML could not be read, else None), sorted by uuid.
    """
    domains = []
    for uuid, name in sorted(agent.driver.list_guests().items()):
        entry = {'uuid': uuid, 'name': name, 'live_xml': None,
                 'persistent_xml': None, 'error': None}
        try:
            entry['live_xml'] = agent.driver.get_domain_xml(uuid)
            entry['persistent_xml'] = agent.driver.get_domain_xml(
                uuid, persistent=True)
        except exception.NumamigException as exc:
            # Gone since it was listed, or unreadable: the audit says so.
            entry['error'] = str(exc)
        domains.append(entry)
    return domains


def delete_instance(agent, ctxt, instance):
    """Destroy a guest here and stop counting it; idempotent.

    :returns: True if a domain was destroyed, False if there was none.
    :raises MigrationError: the guest is migrating from this host.
    """
    if instance.uuid in {job.instance.uuid for job in
                         agent.outgoing.jobs()}:
        raise exception.MigrationError(
            reason=f"instance {instance.uuid} is migrating from "
                   f"{agent.host}; abort the migration first")
    present = instance.uuid in agent.driver.list_guests()
    if present:
        agent.driver.destroy(instance.uuid)
    if agent.tracker.drop_instance(instance.uuid, deleted=True) or present:
        report.send_now(agent, ctxt, f"deleting {instance.uuid}")
    LOG.info("%s: deleted instance %s (%s)", agent.host, instance.uuid,
             'domain destroyed' if present else 'no domain was left')
    return present
