"""Client side of the compute agent's RPC API (conductor and peers call it).

Every method here builds its arguments, checks which API version the
receiving agent may be sent (the ``[upgrade_levels] compute`` cap), drops
what an older agent would not understand, and calls or casts. The object
versions each API version carries are declared in OBJECT_VERSIONS so that
a capped client backports the objects too.

In a rolling upgrade each message is capped at what its receiver
serves, known before it is sent, never learnt from a refusal:

* the conductor's client is given each host's reported service version
  (``peer_versions``: the conductor's host reports), which
  numamig.objects.service.SERVICE_VERSION_HISTORY maps to the newest
  compute API version that host serves;
* an agent's client learns a peer's release from the LiveMigrateData
  that peer built (release 1 builds 1.0), and a message carrying
  LiveMigrateData goes at the API version of that object's version: the
  object was built by the destination and passed through the source, so
  its version is the oldest either speaks.

A message the receiver's version cannot take is not sent:
UnsupportedVersion is raised at once, as a refusal was before, and the
caller takes its old path.

Objects travel in the versions the message's API version carries
(OBJECT_VERSIONS): each message goes at the lowest API version, from the
one its method needs up to the cap, whose manifest carries every object
in it at the version it has, so nothing is lost on the way to a new
agent. An uncapped client's newest version carries every object's newest
version (an object bumped before any manifest names it is sent as it is,
at the newest API version, to agents whose version serves it), except
what HELD_BACK names. A capped client backports to its cap's manifest.
"""

import collections
import threading
import time

from oslo_log import log as logging
import oslo_messaging as messaging
from oslo_utils import versionutils

from numamig import exception
from numamig import rpc
from numamig.compute import rpcapi_postcopy
from numamig.objects import service as service_obj

LOG = logging.getLogger(__name__)

TOPIC = 'numamig-compute'

# The API version every release serves.
_OLDEST_API = '1.0'

# Hosts whose release an agent's client remembers from their
# LiveMigrateData (the most recent; a migration's peers are looked up
# again from its object when forgotten).
LEARNED_PEERS = 256

# The newest compute API version each release serves.
RELEASE_1 = '1.0'
RELEASE_2 = '1.1'
# [upgrade_levels] compute may name a release instead of a version.
VERSION_ALIASES = {'release-1': RELEASE_1, 'release-2': RELEASE_2}

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

# API version -> the object versions a receiver of that version reads.
OBJECT_VERSIONS = {
    RELEASE_1: dict(_BASE_OBJECTS, LiveMigrateData='1.0'),
    RELEASE_2: dict(_BASE_OBJECTS, LiveMigrateData='1.1',
                    InstanceNUMACell='1.1', InstanceNUMATopology='1.1',
                    Instance='1.1', MigrationContext='1.1',
                    # New in release 2; no compute message carries them,
                    # listed so that the manifest is complete.
                    MigrationReclaim='1.0', MigrationThreads='1.0',
                    MigrationPrediction='1.0', MigrationConvergence='1.0',
                    MigrationRecovery='1.0', MigrationDevices='1.0',
                    HostCPU='1.0',
                    CPUPowerState='1.0', CPUPowerCell='1.0',
                    HostLocality='1.0', GuestLocality='1.0',
                    InstanceCPU='1.0',
                    # PCI passthrough (issue 41).
                    HostNUMATopology='1.1', HostNUMACell='1.1',
                    HostPCIDevice='1.0', PCIRequest='1.0',
                    InstancePCIDevice='1.0'),
}

# Objects an uncapped client sends older than their newest version (the
# only exceptions tests/unit/test_object_manifests.py allows): Migration
# 1.1 (release 2: the run's result, the admission queue, status
# postcopy-paused) is for the conductor's records; no compute API
# version carries it, so an
# agent of release 1 (which refuses Migration 1.1) can be sent any.
# ComputeNodeReport 1.1 (the migration guard's state) travels from agents
# to the conductor only (its records API); no compute message carries a
# report to an agent. MigrationStatusChange 1.1 (status postcopy-paused)
# travels only inside Migration 1.1, which agents read from the
# conductor's answers (its records API), never from a compute message.
HELD_BACK = {'Migration': '1.0', 'ComputeNodeReport': '1.0',
             'MigrationStatusChange': '1.0'}


# The options a call's deadline comes from: the conductor passes its
# [DEFAULT] rpc_response_timeout_migration to every call it times
# itself; other calls wait oslo.messaging's [DEFAULT] rpc_response_timeout.
TIMEOUT_OPTION_MIGRATION = 'rpc_response_timeout_migration'
TIMEOUT_OPTION = 'rpc_response_timeout'


class AgentCallTimeout(exception.AgentDidNotAnswer,
                       messaging.MessagingTimeout):
    """A call to an agent that got no answer: numamig's message (host,
    method, deadline and its option) on oslo.messaging's timeout, so that
    every caller that retries or moves on after a timeout still does.
    Its module is in numamig.rpc.ALLOWED_EXMODS: it crosses the wire."""


class ComputeAPI(rpcapi_postcopy.PostCopyCalls):
    """Client side of the compute RPC API.

    API version history, one version per release (the development
    steps of release 2, once 1.1 to 1.7, ship as the one version 1.1):

    * 1.0 - Release 1, before NUMA-aware live migration:
            check_can_live_migrate_destination(instance, source_host,
            migration_uuid),
            check_can_live_migrate_source, pre_live_migration,
            live_migration (cast), post_live_migration_at_destination,
            rollback_live_migration_at_destination, live_migration_abort,
            live_migration_force_complete, build_instance,
            accept_emulated_migration, adopt_guests,
            get_domain_xml; LiveMigrateData 1.0.
    * 1.1 - Release 2, NUMA-aware live migration:
            check_can_live_migrate_destination takes the migration, the
            scheduler's limits and the source's answer (source_data):
            the destination claims, calls no other agent and returns its
            claim in LiveMigrateData; drop_move_claim_at_destination;
            post_live_migration_at_destination takes records_by_source;
            list_domains, delete_instance, refresh_usage,
            resize_virtio_mem, predict_convergence, resume_postcopy and
            postcopy_resume_target; LiveMigrateData 1.1 (dst_numa_info,
            the ``*_supports_numa_live_migration`` flags, the claim, the
            convergence policy), virtio-mem devices in guest cells
            (InstanceNUMACell 1.1 and the objects holding it).
    """

    VERSION = RELEASE_2

    def __init__(self, transport, version_cap=None, topic=TOPIC,
                 exchange=None, release_objects=None, peer_versions=None,
                 reports_first=False):
        """:param version_cap: highest API version to send, or a release
            of VERSION_ALIASES; None: newest.
        :param peer_versions: host -> the service version it last
            reported, or None when unknown (the conductor gives its host
            reports'); each message is capped at what that serves.
        :param reports_first: ``peer_versions`` is the fresher word (the
            conductor reads the stored reports before every task); else
            a peer's own LiveMigrateData is (an agent reads the reports
            at most once a minute).

        :param topic, exchange: where the agents listen (tests and
            embedded deployments sharing a broker use their own).
        :param release_objects: object versions of the older release the
            caller runs as (a testing aid): the newest accepted in
            answers. None: this release's.
        """
        version_cap = VERSION_ALIASES.get(version_cap, version_cap)
        self.version_cap = version_cap
        target = messaging.Target(topic=topic, exchange=exchange,
                                  version='1.0')
        # What the newest message this client may send carries.
        self._manifest = rpc.manifest_for_cap(OBJECT_VERSIONS, version_cap,
                                              HELD_BACK)
        # The newest API version it may send (a cap names one it knows).
        self._newest = _versions('1.0', version_cap or self.VERSION)[-1]
        self._clients = _clients_by_version(
            transport, target, self._newest, self._manifest,
            release_objects)
        self.client = self._clients[self._newest]
        # (since, objects' versions needed) -> version: a few dozen keys
        # at most (objects x their versions); asked on every call.
        self._version_by_need = {}
        self.peer_versions = peer_versions
        self._reports_first = reports_first
        # host -> service version learnt from its LiveMigrateData.
        self._learned = collections.OrderedDict()
        self._learned_lock = threading.Lock()

    def cap_for(self, host):
        """The newest API version ``host`` is sent: this client's cap,
        lowered to what the host's service version serves."""
        if self._newest == _OLDEST_API:
            return self._newest
        # A host restarted as another release since its LiveMigrateData
        # was learnt (an upgrade rolled back) must not be sent what only
        # the release before served: the conductor, which syncs the
        # reports before each task, trusts them first.
        version = None
        if self._reports_first and self.peer_versions is not None:
            version = self.peer_versions(host)
        if version is None:
            with self._learned_lock:
                version = self._learned.get(host)
        if version is None and self.peer_versions is not None:
            version = self.peer_versions(host)
        if version is None or version >= service_obj.SERVICE_VERSION:
            return self._newest
        return min(self._newest,
                   service_obj.api_version_for(version, 'compute_rpc'),
                   key=versionutils.convert_version_to_tuple)

    def _learn_from(self, host, migrate_data):
        """Remember ``host``'s release from the LiveMigrateData it built:
        release 1 builds 1.0, every later release a newer one."""
        if host is None or not hasattr(migrate_data, 'VERSION'):
            return
        version = 1 if migrate_data.VERSION == '1.0' else \
            service_obj.NUMA_LIVE_MIGRATION_VERSION
        with self._learned_lock:
            self._learned[host] = version
            self._learned.move_to_end(host)
            while len(self._learned) > LEARNED_PEERS:
                self._learned.popitem(last=False)

    @classmethod
    def from_conf(cls, conf, transport, **kwargs):
        """A client capped by ``[upgrade_levels] compute``."""
        return cls(transport, version_cap=conf.upgrade_levels.compute,
                   **kwargs)

    def supports_conductor_checks(self):
        """Whether this client may send the API 1.3 check and post calls."""
        return self.client.can_send_version(RELEASE_2)

    def supports_numa_live_migration(self):
        """Whether this client may send the NUMA-aware live migration API."""
        return self.client.can_send_version(RELEASE_2)

    def _prepare(self, host, version='1.0', timeout=None,
                 transport_options=None):
        """A call context at ``version``, whose serializer backports the
        objects to what that version carries.

        :raises UnsupportedVersion: ``host`` does not serve ``version``
            (its service version, or this client's cap, is older).
        """
        if not _at_most(version, self.cap_for(host)):
            raise messaging.UnsupportedVersion(version)
        kwargs = {'server': host, 'version': version}
        if timeout is not None:
            kwargs['timeout'] = timeout
        if transport_options is not None:
            kwargs['transport_options'] = transport_options
        return self._clients[version].prepare(**kwargs)

    def _call(self, ctxt, host, version, method, timeout=None,
              kwargs_1_0=None, floor='1.0', timeout_option=None, **kwargs):
        """Call ``method`` once, at the newest version ``host`` serves of:
        the version carrying its objects (_version_for), ``version``
        (what its arguments need), ``floor`` (1.0 unless the method is
        newer).

        A guest with virtio-mem devices is never sent below
        RELEASE_2: an older agent would get it without them and
        account and write its memory wrongly: UnsupportedVersion is
        raised for such an agent, nothing sent.

        :param kwargs_1_0: the arguments API 1.0 takes, when they differ.
        :param timeout_option: the option ``timeout`` comes from, for the
            error when nobody answers (default: see _timed_out).
        :raises UnsupportedVersion: ``host`` does not serve ``floor``
            (nothing is sent).
        """
        # One walk of the arguments' objects serves both questions.
        needs = rpc.object_needs_in(tuple(kwargs.values()))
        if needs.virtio_mem:
            floor = version = max(
                (floor, version, RELEASE_2),
                key=versionutils.convert_version_to_tuple)
        tries = list(dict.fromkeys(
            (self._version_needing(version, needs.versions), version,
             floor)))
        cap = self.cap_for(host)
        attempt = next((t for t in tries if _at_most(t, cap)), None)
        if attempt is None:
            raise messaging.UnsupportedVersion(floor, method=method)
        sent = kwargs_1_0 if attempt == '1.0' and \
            kwargs_1_0 is not None else kwargs
        try:
            return self._delivered_call(ctxt, host, attempt, method,
                                        timeout, sent)
        except messaging.MessagingTimeout as exc:
            raise self._timed_out(host, method, timeout,
                                  timeout_option) from exc

    def _call_once(self, ctxt, host, version, method, timeout=None,
                   **kwargs):
        """Call ``method`` at ``version`` only (no older one is tried)."""
        try:
            return self._delivered_call(ctxt, host, version, method,
                                        timeout, kwargs)
        except messaging.MessagingTimeout as exc:
            raise self._timed_out(host, method, timeout) from exc

    def _delivered_call(self, ctxt, host, version, method, timeout, kwargs,
                        clock=time.monotonic, sleep=time.sleep):
        """``method`` called on ``host``; sent again while no queue of
        ``host`` takes it (rpc.sent_until_taken), within the call's one
        deadline.

        :raises MessagingTimeout: no queue took it before the deadline,
            or no answer came.
        """
        def call(wait):
            return self._prepare(
                host, version, wait or timeout,
                transport_options=rpc.MANDATORY).call(ctxt, method, **kwargs)
        try:
            return rpc.sent_until_taken(
                call, lambda: timeout or self._response_timeout(),
                f"{method} to compute host {host}", clock=clock, sleep=sleep)
        except messaging.MessageUndeliverable:
            raise messaging.MessagingTimeout(
                f"no queue of {host} took {method}") from None

    def _timed_out(self, host, method, timeout, option=None):
        """What a call nobody answered says: who, what, which deadline
        and its option (not oslo.messaging's bare message ID)."""
        if timeout is None:
            timeout = self._response_timeout()
            option = f"[DEFAULT] {TIMEOUT_OPTION}"
        # A caller that sets a timeout without naming its option is the
        # conductor, which times every call it makes itself.
        option = option or f"[DEFAULT] {TIMEOUT_OPTION_MIGRATION}"
        return AgentCallTimeout(host=host, method=method, timeout=timeout,
                                option=option)

    def _version_for(self, since, *values):
        """The API version to send ``values`` at: the lowest from ``since``
        up to the cap whose manifest carries each object in them at its
        version (held back as this client's manifest says); the newest
        allowed when none does."""
        return self._version_needing(since, rpc.object_versions_in(values))

    def _version_needing(self, since, needed):
        """``_version_for`` from what ``rpc.object_versions_in`` found,
        remembered per (since, needed)."""
        key = (since, tuple(sorted(needed.items())))
        version = self._version_by_need.get(key)
        if version is None:
            version = self._version_by_need[key] = self._search_version(
                since, needed)
        return version

    def _search_version(self, since, needed):
        wanted = {name: min(version, self._manifest.get(name, version),
                            key=versionutils.convert_version_to_tuple)
                  for name, version in needed.items()}
        for version in _versions(since, self._newest):
            if rpc.carries(OBJECT_VERSIONS[version], wanted):
                return version
        return self._newest

    # -- live migration, destination side ---------------------------------

    def check_can_live_migrate_destination(self, ctxt, instance, dest_host,
                                           migration, limits, timeout=None,
                                           source_data=None):
        """Ask ``dest_host`` to check, claim and describe its placement.

        With ``source_data`` (the source's answer to
        check_can_live_migrate_source) the call goes at API 1.3: the
        destination calls no other agent and returns its claim instead of
        recording it. A destination whose service version serves less
        (or a cap below 1.3) is asked the 1.1 way and asks the source
        itself. A destination of release 1, or a 1.0 cap, is not sent
        the claim parameters: the destination then neither claims nor
        offers NUMA-aware live migration.

        :returns: LiveMigrateData (dst_numa_info set when it claimed;
            migration_context set when the caller must record the claim).
        :raises MigrationPreCheckError: the destination refused.
        """
        kwargs = {'instance': instance, 'source_host': instance.host,
                  'migration_uuid': migration.uuid}
        if source_data is not None and _at_most(
                RELEASE_2, self.cap_for(dest_host)):
            return self._call(
                ctxt, dest_host, RELEASE_2,
                'check_can_live_migrate_destination', timeout,
                floor=RELEASE_2, migration=migration,
                limits=limits, source_data=source_data, **kwargs)
        if not self.supports_numa_live_migration():
            return self._call(ctxt, dest_host, '1.0',
                              'check_can_live_migrate_destination',
                              timeout, **kwargs)
        return self._call(ctxt, dest_host, RELEASE_2,
                          'check_can_live_migrate_destination', timeout,
                          kwargs_1_0=dict(kwargs), migration=migration,
                          limits=limits, **kwargs)

    def pre_live_migration(self, ctxt, instance, migrate_data,
                           timeout=None, timeout_option=None):
        """Let the destination get ready; returns updated migrate data.

        :param timeout: seconds to wait; None: rpc_response_timeout.
        :param timeout_option: where ``timeout`` comes from, for the
            error when nobody answers.
        """
        self._learn_from(migrate_data.get('dest_host'), migrate_data)
        return self._call(ctxt, migrate_data.dest_host,
                          self._lmd_version(migrate_data),
                          'pre_live_migration', timeout,
                          timeout_option=timeout_option, instance=instance,
                          migrate_data=migrate_data)

    def post_live_migration_at_destination(self, ctxt, instance, migration,
                                           records_by_source=False):
        """Make the destination adopt the guest.

        :param records_by_source: the caller records the claim applied
            with ``completed`` (the conductor's records API); the
            destination then only counts the guest (release 2). A
            destination of release 1 (which took no claim) is asked at
            1.0 and records the placement itself.
        """
        if records_by_source and self.supports_conductor_checks():
            return self._call(
                ctxt, migration.dest_host, RELEASE_2,
                'post_live_migration_at_destination',
                kwargs_1_0={'instance': instance, 'migration': migration},
                instance=instance, migration=migration,
                records_by_source=True)
        return self._call(ctxt, migration.dest_host, '1.0',
                          'post_live_migration_at_destination',
                          instance=instance, migration=migration)

    def rollback_live_migration_at_destination(self, ctxt, instance,
                                               migration):
        """Remove whatever the destination prepared for the guest."""
        return self._call(ctxt, migration.dest_host, '1.0',
                          'rollback_live_migration_at_destination',
                          instance=instance, migration=migration)

    def drop_move_claim_at_destination(self, ctxt, instance, migration,
                                       timeout=None):
        """Drop the destination's move claim (idempotent).

        :param timeout: seconds to wait; None: rpc_response_timeout.
        :returns: False, nothing sent, when the cap or the destination's
            service version is below 1.1: an agent that old never took
            a claim to drop.
        """
        if not _at_most(RELEASE_2,
                        self.cap_for(migration.dest_host)):
            LOG.info("Compute host %s is not sent API %s (its release or "
                     "[upgrade_levels] compute): it took no claim for "
                     "migration %s to drop", migration.dest_host,
                     RELEASE_2, migration.uuid)
            return False
        self._call(ctxt, migration.dest_host, RELEASE_2,
                   'drop_move_claim_at_destination', timeout,
                   floor=RELEASE_2, instance=instance,
                   migration=migration)
        return True

    def accept_emulated_migration(self, ctxt, instance, migration, dest_xml,
                                  timeout=None, timeout_option=None):
        """Emulated migration: the destination defines the guest's XML.

        :param timeout: seconds to wait; None: rpc_response_timeout.
        :param timeout_option: where ``timeout`` comes from, for the
            error when nobody answers.
        :returns: the destination driver's MigrationResult as a dict of
            its fields, or None from an agent of a release that answered
            nothing (the caller measures the run itself then).
        """
        return self._call(ctxt, migration.dest_host, '1.0',
                          'accept_emulated_migration', timeout,
                          timeout_option=timeout_option,
                          instance=instance, migration=migration,
                          dest_xml=dest_xml)

    # -- live migration, source side --------------------------------------

    def check_can_live_migrate_source(self, ctxt, instance, dest_check_data,
                                      timeout=None):
        """Ask the source to confirm and add its own data.

        The conductor asks it (API 1.3 flow), or a destination the
        conductor asked the way before 1.3; the method is the same.
        """
        answer = self._call(ctxt, instance.host,
                            self._lmd_version(dest_check_data),
                            'check_can_live_migrate_source', timeout,
                            instance=instance,
                            dest_check_data=dest_check_data)
        # The source built it: it says which release the source runs.
        self._learn_from(instance.host, answer)
        return answer

    def live_migration(self, ctxt, instance, migration, migrate_data,
                       wait=True, clock=time.monotonic, sleep=time.sleep):
        """Start the migration on the source (cast: it runs for long).

        A cast gets no refusal back, so its version follows
        ``migrate_data`` (and the source's service version): an old
        source only ever sees API 1.0 here.

        A cast no queue takes comes back (rpc.MANDATORY): after a broker
        restart the source's queue exists again only once its agent has
        reconnected, and a start request cast meanwhile was lost until
        the sweep sent it again (14-28 s later).

        :param wait: cast again while the broker returns it, for up to a
            third of rpc_response_timeout; False: one try (the sweep,
            which must not stall on one source that is down).
        :returns: whether a queue of the source took it.
        """
        version = min(self._lmd_version(migrate_data),
                      self.cap_for(migration.source_host),
                      key=versionutils.convert_version_to_tuple)
        cctxt = self._prepare(migration.source_host, version,
                              transport_options=rpc.MANDATORY)

        def cast(wait_s):
            cctxt.cast(ctxt, 'live_migration', instance=instance,
                       migration=migration, migrate_data=migrate_data)
            return True
        try:
            return rpc.sent_until_taken(
                cast, lambda: self._response_timeout() / 3 if wait else 0,
                f"the start request of migration {migration.uuid} to "
                f"source {migration.source_host}", clock=clock, sleep=sleep)
        except messaging.MessageUndeliverable:
            LOG.warning("Migration %s: no queue of source %s took its "
                        "start request (its agent is not connected to the "
                        "broker); the stalled-migration sweep sends it "
                        "again", migration.uuid, migration.source_host)
            return False
        except messaging.MessageDeliveryFailure as exc:
            LOG.warning("Migration %s: its start request to source %s was "
                        "not sent (%s); the stalled-migration sweep sends "
                        "it again", migration.uuid, migration.source_host,
                        exc)
            return False

    def _response_timeout(self):
        return self.client.timeout or \
            self.client.transport.conf.rpc_response_timeout

    def live_migration_abort(self, ctxt, instance, migration):
        """Ask the source to abort the running migration."""
        return self._call(ctxt, migration.source_host, '1.0',
                          'live_migration_abort', instance=instance,
                          migration=migration)

    def live_migration_force_complete(self, ctxt, instance, migration):
        """Ask the source to make the running migration converge."""
        return self._call(ctxt, migration.source_host, '1.0',
                          'live_migration_force_complete', instance=instance,
                          migration=migration)

    # -- guests -------------------------------------------------------------

    def build_instance(self, ctxt, instance, host, limits=None):
        """Claim on ``host`` and create the guest; returns the Instance."""
        return self._call(ctxt, host, '1.0', 'build_instance',
                          instance=instance, limits=limits)

    def adopt_guests(self, ctxt, host):
        """Have ``host`` count and describe the guests numamig lacks.

        :returns: an unrecorded Instance per NUMA guest not yet known,
            with uuid, name, sizes and placement parsed from its XML.
        """
        return self._call_once(ctxt, host, '1.0', 'adopt_guests')

    def get_domain_xml(self, ctxt, host, instance_uuid):
        """Return the live domain XML of a guest on ``host``."""
        return self._call_once(ctxt, host, '1.0', 'get_domain_xml',
                               instance_uuid=instance_uuid)

    def can_operate(self):
        """Whether list_domains and delete_instance may be sent."""
        return self.client.can_send_version(RELEASE_2)

    def list_domains(self, ctxt, host, timeout=None):
        """Every domain on ``host``, recorded by numamig or not.

        :returns: a list of {'uuid', 'name', 'live_xml',
            'persistent_xml', 'error'} dicts (XML None where unreadable,
            with the reason in 'error').
        :raises UnsupportedVersion: the cap or the agent is older than
            1.2 (the caller falls back to get_domain_xml per guest).
        """
        if not self.can_operate():
            raise messaging.UnsupportedVersion(RELEASE_2)
        return self._call_once(ctxt, host, RELEASE_2,
                               'list_domains', timeout)

    def predict_convergence(self, ctxt, instance, policy=None,
                            timeout=None):
        """Ask the instance's host to sample its dirty rate and predict
        its migration (API 1.6).

        :returns: see ComputeDriver.predict_convergence.
        :raises UnsupportedVersion: the cap or the agent is older than
            1.6 (the caller records no prediction).
        """
        if not self.client.can_send_version(RELEASE_2):
            raise messaging.UnsupportedVersion(RELEASE_2)
        return self._prepare(instance.host, RELEASE_2,
                             timeout).call(ctxt, 'predict_convergence',
                                           instance=instance, policy=policy)

    def sample_dirty_rates(self, ctxt, host, instance_uuids, seconds=1,
                           timeout=None, max_age=0):
        """Ask ``host`` to estimate its guests' dirty rates, all in one
        window of ``seconds`` (API 1.1, release 2); a guest it sampled at
        most ``max_age`` seconds ago is answered from that sample.

        :returns: see ComputeDriver.sample_dirty_rates.
        :raises UnsupportedVersion: the cap or the agent is older (the
            caller plans without the rates).
        """
        if not self.client.can_send_version(RELEASE_2):
            raise messaging.UnsupportedVersion(RELEASE_2)
        return self._call_once(ctxt, host, RELEASE_2, 'sample_dirty_rates',
                               timeout, instance_uuids=list(instance_uuids),
                               seconds=seconds, max_age=max_age)

    def refresh_usage(self, ctxt, host, timeout=None):
        """Have ``host`` recompute its usage from the records and report.

        :returns: the ComputeNodeReport it sent.
        :raises UnsupportedVersion: the cap or the agent is older than
            1.4 (it recomputes every [compute] update_resources_interval).
        """
        if not self.client.can_send_version(RELEASE_2):
            raise messaging.UnsupportedVersion(RELEASE_2)
        return self._call_once(ctxt, host, RELEASE_2, 'refresh_usage',
                               timeout)

    def resize_virtio_mem(self, ctxt, host, instance_uuid, requested,
                          deadline_s, timeout=None):
        """Have ``host`` set a guest's virtio-mem requested sizes
        ({guest cell: MiB}) and wait up to ``deadline_s`` for the guest.

        :returns: {'current': {cell text: MiB}, 'reached': bool}.
        :raises UnsupportedVersion: the cap or the agent is older than
            1.5.
        :raises AgentCallTimeout: no answer within ``timeout`` (the
            guest's deadline and a margin).
        """
        if not self.client.can_send_version(RELEASE_2):
            raise messaging.UnsupportedVersion(RELEASE_2)
        try:
            return self._prepare(host, RELEASE_2, timeout).call(
                ctxt, 'resize_virtio_mem', instance_uuid=instance_uuid,
                requested={str(cell): mib
                           for cell, mib in requested.items()},
                deadline_s=deadline_s)
        except messaging.MessagingTimeout as exc:
            # An operator reads it: "Timed out waiting for a reply to
            # message ID ..." named neither the host nor the deadline.
            raise self._timed_out(host, 'resize_virtio_mem', timeout,
                                  option='[virtio_mem] resize_timeout') \
                from exc

    def delete_instance(self, ctxt, instance, timeout=None):
        """Destroy a guest on its host and release its usage there.

        :raises UnsupportedVersion: the cap or the agent is older than
            1.2: that agent cannot delete guests.
        """
        if not self.can_operate():
            raise messaging.UnsupportedVersion(RELEASE_2)
        return self._call(ctxt, instance.host, RELEASE_2,
                          'delete_instance', timeout,
                          floor=RELEASE_2, instance=instance)

    def _lmd_version(self, migrate_data):
        """The API version to carry ``migrate_data`` at.

        The lowest the cap allows whose manifest carries the object's
        version: an object in an old peer's version goes at that peer's
        API version (the casts' only clue), with every other object of
        the message backported to what that version carries.
        """
        return self._version_for('1.0', migrate_data)


def _at_most(version, cap):
    as_tuple = versionutils.convert_version_to_tuple
    return as_tuple(version) <= as_tuple(cap)


def _versions(oldest, newest):
    """The API versions from ``oldest`` to ``newest``, oldest first."""
    as_tuple = versionutils.convert_version_to_tuple
    return sorted((v for v in OBJECT_VERSIONS
                   if as_tuple(oldest) <= as_tuple(v) <= as_tuple(newest)),
                  key=as_tuple)


def _clients_by_version(transport, target, newest, manifest,
                        release_objects):
    """API version -> the RPC client sending at it, up to ``newest``.

    Each backports to the manifest of its version (``manifest`` for
    ``newest``); versions with equal manifests share one client.
    """
    clients, by_manifest = {}, {}
    for version in reversed(_versions('1.0', newest)):
        objects_ = manifest if version == newest else \
            OBJECT_VERSIONS[version]
        key = tuple(sorted(objects_.items()))
        if key not in by_manifest:
            by_manifest[key] = rpc.get_client(
                transport, target, version_cap=version,
                version_manifest=objects_, known_versions=release_objects)
        clients[version] = by_manifest[key]
    return clients
