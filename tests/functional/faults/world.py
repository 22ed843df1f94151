"""The world check run after every fault round: is everything where it says?

Read straight from the sources of truth, never through the daemons under
test (they may be the ones that are wrong): the database, and each
host's hypervisor (its libvirtd, the live and the persistent domain XML).
It holds the deployment to:

* every migration final, and every unsuccessful one with an error that
  says what happened (not only oslo.messaging's "Timed out waiting for
  a reply to message ID ...");
* no claim left: no instance record still carries a migration context;
* each guest defined on exactly one host, the one its record names;
* no pCPU pinned by two guests: in the records, in what the agents last
  reported (their usage equals what the records imply, numamig.audit's
  usage rule), and in the live domain XML (numamig.audit's pins rule,
  which also finds XML that differs from the records and persistent
  definitions that differ from the running domain).

``problems`` returns one line per problem; an empty list is a clean
world. Migrations not yet final make every other check moot, so they are
reported alone.
"""

import collections

import libvirt

from numamig.audit import pins
from numamig.audit import usage
from numamig.db import instances
from numamig.db import migrations
from numamig.objects import fields

FINAL = fields.MigrationStatus.FINAL
COMPLETED = fields.MigrationStatus.COMPLETED
# oslo.messaging's words for a call nobody answered: they say neither who
# did not answer nor what was asked.
RAW_TIMEOUT = 'Timed out waiting for a reply to message ID'


def problems(deployment):
    """One line per problem of the deployment's world; [] when clean."""
    unfinished = [m for m in migrations.get_all(deployment.db)
                  if m.status not in FINAL]
    if unfinished:
        return [f"migration {m.uuid} of {m.instance_uuid} still "
                f"{m.status} (source {m.source_host}, destination "
                f"{m.dest_host})" for m in unfinished]
    records = {r.instance.uuid: r.instance
               for r in instances.get_all(deployment.db)}
    domains = {host: _domains(conn)
               for host, conn in deployment.hypervisors.items()}
    found = []
    found += _claims_left(records)
    found += _placement(records, domains)
    found += _record_overlaps(records)
    found += _reports(deployment)
    found += _live_xml(deployment, records, domains)
    return found


def unexplained_ends(deployment, migration_uuids):
    """Unsuccessful migrations among ``migration_uuids`` with no error."""
    found = []
    for uuid in migration_uuids:
        migration = migrations.get(deployment.db, uuid, with_history=False)
        error = migration.get('error') or ''
        if migration.status != COMPLETED and not error:
            found.append(f"migration {uuid} ended {migration.status} "
                         f"without an error saying why")
        elif error.startswith(RAW_TIMEOUT):
            found.append(f"migration {uuid} ended {migration.status} with "
                         f"an error naming only a message ID: {error}")
    return found


def _domains(conn):
    """uuid -> (name, live XML, persistent XML) of a host's domains."""
    found = {}
    for dom in conn.listAllDomains():
        try:
            found[dom.UUIDString()] = (
                dom.name(), dom.XMLDesc(0),
                dom.XMLDesc(libvirt.VIR_DOMAIN_XML_INACTIVE)
                if dom.isPersistent() else None)
        except libvirt.libvirtError:
            continue  # undefined between the listing and the read
    return found


def _claims_left(records):
    return [f"instance {i.name} ({uuid}) still holds a claim on "
            f"{i.migration_context.dest_host} for migration "
            f"{i.migration_context.migration_uuid}"
            for uuid, i in records.items() if i.get('migration_context')]


def _placement(records, domains):
    """Each guest defined on exactly one host: the recorded one."""
    hosts_of = collections.defaultdict(list)
    for host, guests in domains.items():
        for uuid in guests:
            hosts_of[uuid].append(host)
    found = []
    for uuid, instance in records.items():
        where = sorted(hosts_of.pop(uuid, []))
        if where != [instance.host]:
            found.append(f"instance {instance.name} ({uuid}) recorded on "
                         f"{instance.host}, defined on "
                         f"{', '.join(where) or 'no host'}")
    found += [f"domain {uuid} on {', '.join(where)} has no record"
              for uuid, where in hosts_of.items()]
    return found


def _record_overlaps(records):
    owners = collections.defaultdict(set)
    for uuid, instance in records.items():
        topology = instance.get('numa_topology')
        if topology is None:
            continue
        pcpus = set(topology.cpu_pinning.values()) | \
            set(topology.cpuset_reserved)
        for pcpu in pcpus:
            owners[(instance.host, pcpu)].add(uuid)
    return [f"{host}: pCPU {pcpu} recorded for {len(guests)} guests: "
            f"{', '.join(sorted(guests))}"
            for (host, pcpu), guests in sorted(owners.items())
            if len(guests) > 1]


def _reports(deployment):
    found = []
    for report in deployment.reports():
        found += [f"report of {f.host}: {f.detail}"
                  for f in usage.of_host(deployment.db, report)]
    return found


def _live_xml(deployment, records, domains):
    found = []
    topologies = {r.host: r.topology for r in deployment.reports()}
    for host, guests in domains.items():
        audited = [pins.Guest(uuid, name, xml=live, persistent_xml=kept,
                              instance=records.get(uuid))
                   for uuid, (name, live, kept) in guests.items()]
        found += [f"live XML on {f.host}: {f.detail}" for f in
                  pins.audit_host(host, topologies[host], audited)]
    return found
