"""Client side of the compute agent's RPC API (conductor and peers call it).

Every method here builds its arguments, checks which API version the
receiving agent may be sent (the ``[upgrade_levels] compute`` cap), drops
what an older agent would not understand, and calls or casts. The object
versions each API version carries are declared in OBJECT_VERSIONS so that
a capped client backports the objects too.

In a rolling upgrade nobody tells a sender which release its peer runs,
so the version of each message comes from what the sender can know:

* a call an older agent refuses (UnsupportedVersion, raised by its RPC
  dispatcher before any endpoint runs) is sent again at API 1.0 with its
  objects backported;
* a message carrying LiveMigrateData goes at the API version of that
  object's version: the object was built by the destination and passed
  through the source, so its version is the oldest either speaks.

Objects always go in the versions OBJECT_VERSIONS declares for the
newest API version the cap allows, even uncapped: an object newer than
every compute API version (Migration 1.1, whose result fields only the
conductor's records need) then never reaches an agent that cannot read
it.
"""

from oslo_log import log as logging
import oslo_messaging as messaging
from oslo_utils import versionutils

from numamig import rpc

LOG = logging.getLogger(__name__)

TOPIC = 'numamig-compute'

# The API version that brought NUMA-aware live migration: claim parameters
# on check_can_live_migrate_destination, drop_move_claim_at_destination and
# LiveMigrateData 1.1.
NUMA_LIVE_MIGRATION_VERSION = '1.1'

_BASE_OBJECTS = {
    'ComputeNodeReport': '1.0',
    'HostNUMACell': '1.0',
    'HostNUMATopology': '1.0',
    'Instance': '1.0',
    'InstanceNUMACell': '1.0',
    'InstanceNUMATopology': '1.0',
    'Migration': '1.0',
    'MigrationContext': '1.0',
    'MigrationStatusChange': '1.0',
    'NUMALimits': '1.0',
    'NUMAMigrateInfo': '1.0',
    'NUMAPagesTopology': '1.0',
}

# The API version that brought list_domains and delete_instance.
OPERATIONS_VERSION = '1.2'

# The API version that brought the conductor-driven checks: the conductor
# asks the source, then the destination with the source's answer (which
# then never calls another agent) and records the claim the destination
# returns; the source records the claim applied with ``completed``.
CONDUCTOR_CHECKS_VERSION = '1.3'

# The API version that brought refresh_usage (heal claims).
USAGE_VERSION = '1.4'

# API version -> the object versions a receiver of that version reads.
OBJECT_VERSIONS = {
    '1.0': dict(_BASE_OBJECTS, LiveMigrateData='1.0'),
    '1.1': dict(_BASE_OBJECTS, LiveMigrateData='1.1'),
    '1.2': dict(_BASE_OBJECTS, LiveMigrateData='1.1'),
    '1.3': dict(_BASE_OBJECTS, LiveMigrateData='1.2'),
    '1.4': dict(_BASE_OBJECTS, LiveMigrateData='1.2'),
}


class ComputeAPI:
    """Client side of the compute RPC API.

    API version history:

    * 1.0 - The release before NUMA-aware live migration:
            check_can_live_migrate_destination(instance, source_host,
            migration_uuid),
            check_can_live_migrate_source, pre_live_migration,
            live_migration (cast), post_live_migration_at_destination,
            rollback_live_migration_at_destination, live_migration_abort,
            live_migration_force_complete, build_instance,
            accept_emulated_migration, adopt_guests,
            get_domain_xml; LiveMigrateData 1.0.
    * 1.1 - NUMA-aware live migration: check_can_live_migrate_destination
            takes the migration and the scheduler's limits (the claim
            parameters); drop_move_claim_at_destination added;
            LiveMigrateData 1.1 (dst_numa_info and the two
            ``*_supports_numa_live_migration`` flags).
    * 1.2 - list_domains (every domain with its live and persistent XML,
            for audits) and delete_instance.
    * 1.3 - check_can_live_migrate_destination takes the source's answer
            (source_data): the conductor asks the source first, the
            destination calls no other agent and returns its claim in
            LiveMigrateData 1.2 (migration_context) for the conductor to
            record; post_live_migration_at_destination takes
            records_by_source (the source records the claim applied
            with ``completed``: the destination only counts the guest).
    * 1.4 - refresh_usage: recompute usage from the records now and
            report it (numamig-manage heal claims).
    """

    VERSION = '1.4'

    def __init__(self, transport, version_cap=None, topic=TOPIC,
                 exchange=None, release_objects=None):
        """:param version_cap: highest API version to send; None: newest.

        :param topic, exchange: where the agents listen (tests and
            embedded deployments sharing a broker use their own).
        :param release_objects: object versions of the older release the
            caller runs as (a testing aid): the newest accepted in
            answers. None: this release's.
        """
        self.version_cap = version_cap
        target = messaging.Target(topic=topic, exchange=exchange,
                                  version='1.0')
        self.client = rpc.get_client(
            transport, target, version_cap=version_cap,
            version_manifest=rpc.manifest_for_cap(
                OBJECT_VERSIONS, version_cap or self.VERSION),
            known_versions=release_objects)
        # For peers that refuse a newer API: everything backported to 1.0.
        self._client_1_0 = rpc.get_client(
            transport, target, version_cap='1.0',
            version_manifest=OBJECT_VERSIONS['1.0'],
            known_versions=release_objects)

    @classmethod
    def from_conf(cls, conf, transport, **kwargs):
        """A client capped by ``[upgrade_levels] compute``."""
        return cls(transport, version_cap=conf.upgrade_levels.compute,
                   **kwargs)

    def supports_conductor_checks(self):
        """Whether this client may send the API 1.3 check and post calls."""
        return self.client.can_send_version(CONDUCTOR_CHECKS_VERSION)

    def supports_numa_live_migration(self):
        """Whether this client may send the NUMA-aware live migration API."""
        return self.client.can_send_version(NUMA_LIVE_MIGRATION_VERSION)

    def _prepare(self, host, version='1.0', timeout=None, client=None):
        kwargs = {'server': host, 'version': version}
        if timeout is not None:
            kwargs['timeout'] = timeout
        return (client or self.client).prepare(**kwargs)

    def _call(self, ctxt, host, version, method, timeout=None,
              kwargs_1_0=None, **kwargs):
        """Call ``method`` at ``version``; at 1.0 if ``host`` refuses it.

        :param kwargs_1_0: the arguments API 1.0 takes, when they differ.
        """
        try:
            return self._prepare(host, version, timeout).call(
                ctxt, method, **kwargs)
        except messaging.UnsupportedVersion:
            if version == '1.0':
                raise
        LOG.info("Compute host %s does not serve API %s (an agent of the "
                 "release before NUMA-aware live migration); %s sent again "
                 "at 1.0", host, version, method)
        cctxt = self._prepare(host, '1.0', timeout, client=self._client_1_0)
        return cctxt.call(ctxt, method, **(
            kwargs if kwargs_1_0 is None else kwargs_1_0))

    # -- live migration, destination side ---------------------------------

    def check_can_live_migrate_destination(self, ctxt, instance, dest_host,
                                           migration, limits, timeout=None,
                                           source_data=None):
        """Ask ``dest_host`` to check, claim and describe its placement.

        With ``source_data`` (the source's answer to
        check_can_live_migrate_source) the call goes at API 1.3: the
        destination calls no other agent and returns its claim instead of
        recording it. A destination refusing 1.3 is asked the 1.1 way
        and asks the source itself. With a 1.0 cap the claim parameters
        are not sent: the destination then neither claims nor offers
        NUMA-aware live migration.

        :returns: LiveMigrateData (dst_numa_info set when it claimed;
            migration_context set when the caller must record the claim).
        :raises MigrationPreCheckError: the destination refused.
        """
        kwargs = {'instance': instance, 'source_host': instance.host,
                  'migration_uuid': migration.uuid}
        if source_data is not None and self.supports_conductor_checks():
            try:
                return self._prepare(
                    dest_host, CONDUCTOR_CHECKS_VERSION, timeout).call(
                        ctxt, 'check_can_live_migrate_destination',
                        migration=migration, limits=limits,
                        source_data=source_data, **kwargs)
            except messaging.UnsupportedVersion:
                LOG.info("Compute host %s does not serve API %s; it checks "
                         "migration %s the 1.1 way (asking the source "
                         "itself)", dest_host, CONDUCTOR_CHECKS_VERSION,
                         migration.uuid)
        if not self.supports_numa_live_migration():
            return self._call(ctxt, dest_host, '1.0',
                              'check_can_live_migrate_destination',
                              timeout, **kwargs)
        return self._call(ctxt, dest_host, NUMA_LIVE_MIGRATION_VERSION,
                          'check_can_live_migrate_destination', timeout,
                          kwargs_1_0=dict(kwargs), migration=migration,
                          limits=limits, **kwargs)

    def pre_live_migration(self, ctxt, instance, migrate_data):
        """Let the destination get ready; returns updated migrate data."""
        return self._call(ctxt, migrate_data.dest_host,
                          self._lmd_version(migrate_data),
                          'pre_live_migration', instance=instance,
                          migrate_data=migrate_data)

    def post_live_migration_at_destination(self, ctxt, instance, migration,
                                           records_by_source=False):
        """Make the destination adopt the guest.

        :param records_by_source: the caller records the claim applied
            with ``completed`` (conductor API 1.3); the destination then
            only counts the guest (API 1.3). A destination refusing 1.3
            (an older release, which took no claim) is asked at 1.0 and
            records the placement itself.
        """
        if records_by_source and self.supports_conductor_checks():
            return self._call(
                ctxt, migration.dest_host, CONDUCTOR_CHECKS_VERSION,
                'post_live_migration_at_destination',
                kwargs_1_0={'instance': instance, 'migration': migration},
                instance=instance, migration=migration,
                records_by_source=True)
        cctxt = self._prepare(migration.dest_host)
        return cctxt.call(ctxt, 'post_live_migration_at_destination',
                          instance=instance, migration=migration)

    def rollback_live_migration_at_destination(self, ctxt, instance,
                                               migration):
        """Remove whatever the destination prepared for the guest."""
        cctxt = self._prepare(migration.dest_host)
        return cctxt.call(ctxt, 'rollback_live_migration_at_destination',
                          instance=instance, migration=migration)

    def drop_move_claim_at_destination(self, ctxt, instance, migration,
                                       timeout=None):
        """Drop the destination's move claim (idempotent).

        :param timeout: seconds to wait; None: rpc_response_timeout.
        :returns: False when the cap forbids 1.1 (nothing is sent) or
            the destination refuses it: an agent that old never took a
            claim to drop.
        """
        if not self.supports_numa_live_migration():
            return False
        cctxt = self._prepare(migration.dest_host,
                              NUMA_LIVE_MIGRATION_VERSION, timeout)
        try:
            cctxt.call(ctxt, 'drop_move_claim_at_destination',
                       instance=instance, migration=migration)
        except messaging.UnsupportedVersion:
            LOG.info("Compute host %s does not serve API %s: it took no "
                     "claim for migration %s to drop", migration.dest_host,
                     NUMA_LIVE_MIGRATION_VERSION, migration.uuid)
            return False
        return True

    def accept_emulated_migration(self, ctxt, instance, migration, dest_xml):
        """Emulated migration: the destination defines the guest's XML.

        :returns: the destination driver's MigrationResult as a dict of
            its fields, or None from an agent of a release that answered
            nothing (the caller measures the run itself then).
        """
        cctxt = self._prepare(migration.dest_host)
        return cctxt.call(ctxt, 'accept_emulated_migration',
                          instance=instance, migration=migration,
                          dest_xml=dest_xml)

    # -- live migration, source side --------------------------------------

    def check_can_live_migrate_source(self, ctxt, instance, dest_check_data,
                                      timeout=None):
        """Ask the source to confirm and add its own data.

        The conductor asks it (API 1.3 flow), or a destination the
        conductor asked the way before 1.3; the method is the same.
        """
        return self._call(ctxt, instance.host,
                          self._lmd_version(dest_check_data),
                          'check_can_live_migrate_source', timeout,
                          instance=instance, dest_check_data=dest_check_data)

    def live_migration(self, ctxt, instance, migration, migrate_data):
        """Start the migration on the source (cast: it runs for long).

        A cast gets no refusal back, so its version follows
        ``migrate_data``: an old source only ever sees API 1.0 here.
        """
        cctxt = self._prepare(migration.source_host,
                              self._lmd_version(migrate_data))
        cctxt.cast(ctxt, 'live_migration', instance=instance,
                   migration=migration, migrate_data=migrate_data)

    def live_migration_abort(self, ctxt, instance, migration):
        """Ask the source to abort the running migration."""
        cctxt = self._prepare(migration.source_host)
        return cctxt.call(ctxt, 'live_migration_abort', instance=instance,
                          migration=migration)

    def live_migration_force_complete(self, ctxt, instance, migration):
        """Ask the source to make the running migration converge."""
        cctxt = self._prepare(migration.source_host)
        return cctxt.call(ctxt, 'live_migration_force_complete',
                          instance=instance, migration=migration)

    # -- guests -------------------------------------------------------------

    def build_instance(self, ctxt, instance, host, limits=None):
        """Claim on ``host`` and create the guest; returns the Instance."""
        cctxt = self._prepare(host)
        return cctxt.call(ctxt, 'build_instance', instance=instance,
                          limits=limits)

    def adopt_guests(self, ctxt, host):
        """Have ``host`` count and describe the guests numamig lacks.

        :returns: an unrecorded Instance per NUMA guest not yet known,
            with uuid, name, sizes and placement parsed from its XML.
        """
        return self._prepare(host).call(ctxt, 'adopt_guests')

    def get_domain_xml(self, ctxt, host, instance_uuid):
        """Return the live domain XML of a guest on ``host``."""
        return self._prepare(host).call(ctxt, 'get_domain_xml',
                                        instance_uuid=instance_uuid)

    def can_operate(self):
        """Whether list_domains and delete_instance may be sent."""
        return self.client.can_send_version(OPERATIONS_VERSION)

    def list_domains(self, ctxt, host, timeout=None):
        """Every domain on ``host``, recorded by numamig or not.

        :returns: a list of {'uuid', 'name', 'live_xml',
            'persistent_xml', 'error'} dicts (XML None where unreadable,
            with the reason in 'error').
        :raises UnsupportedVersion: the cap or the agent is older than
            1.2 (the caller falls back to get_domain_xml per guest).
        """
        if not self.can_operate():
            raise messaging.UnsupportedVersion(OPERATIONS_VERSION)
        return self._prepare(host, OPERATIONS_VERSION, timeout).call(
            ctxt, 'list_domains')

    def refresh_usage(self, ctxt, host, timeout=None):
        """Have ``host`` recompute its usage from the records and report.

        :returns: the ComputeNodeReport it sent.
        :raises UnsupportedVersion: the cap or the agent is older than
            1.4 (it recomputes every [compute] update_resources_interval).
        """
        if not self.client.can_send_version(USAGE_VERSION):
            raise messaging.UnsupportedVersion(USAGE_VERSION)
        return self._prepare(host, USAGE_VERSION, timeout).call(
            ctxt, 'refresh_usage')

    def delete_instance(self, ctxt, instance, timeout=None):
        """Destroy a guest on its host and release its usage there.

        :raises UnsupportedVersion: the cap or the agent is older than
            1.2: that agent cannot delete guests.
        """
        if not self.can_operate():
            raise messaging.UnsupportedVersion(OPERATIONS_VERSION)
        return self._prepare(instance.host, OPERATIONS_VERSION,
                             timeout).call(ctxt, 'delete_instance',
                                           instance=instance)

    def _lmd_version(self, migrate_data):
        """The API version to carry ``migrate_data`` at.

        The newest the cap allows whose LiveMigrateData is not newer than
        the object: an object in an old peer's version goes at that
        peer's API version.
        """
        as_tuple = versionutils.convert_version_to_tuple
        numa = OBJECT_VERSIONS[NUMA_LIVE_MIGRATION_VERSION]
        if self.supports_numa_live_migration() and \
                as_tuple(migrate_data.VERSION) >= \
                as_tuple(numa['LiveMigrateData']):
            return NUMA_LIVE_MIGRATION_VERSION
        return '1.0'
