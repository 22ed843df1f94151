"""Client side of the conductor's records API: what compute agents call.

Only the conductor touches the database: agents record their reports,
claims and migration statuses through these calls and read the records
they act on. A rolling upgrade depends on this API alone (the operators'
has its own, numamig.conductor.rpcapi), so it changes only when agents
need it to; its version history is numamig.conductor.api_versions's.

A conductor of release 2 serves it in namespace ``records`` on the
agents' topic, with RPC threads of its own (an operator's requests can
never take every thread an agent's call back needs, see
doc/source/control-plane.rst); a conductor of release 1 is sent the same
calls on its one topic and API (1.0-1.1), without what release 2 added
(numamig.conductor.rpcclient says how a client learns which).
"""

from oslo_log import log as logging
import oslo_messaging as messaging

from numamig import rpc
from numamig.conductor import api_versions
from numamig.conductor import rpcclient

LOG = logging.getLogger(__name__)

RECORDS = api_versions.RECORDS
# Where conductors of release 2 serve the agents' calls.
AGENT_TOPIC = 'numamig-conductor-agents'


class RecordAPI:
    """Client side of the conductor's records API (a compute agent's).

    Every call goes at the newest version the conductor serves, so that
    answers carry what the agent reads, without the arguments older
    versions lack.
    """

    VERSION = RECORDS.version

    def __init__(self, transport, version_cap=None, timeout=None,
                 topic=None, exchange=None, release_objects=None,
                 agent_topic=None, status_timeout=None,
                 conductor_version=None):
        """:param topic, exchange, timeout, release_objects,
            conductor_version: see rpcclient.ConductorLink.
        :param agent_topic: the agents' topic, used when the conductor
            serves this API (release 2); None: the conductor topic.
        :param status_timeout: seconds one request recording a
            migration's status or completion waits (they take the
            conductor milliseconds; an agent asks again, see
            numamig.compute.patience); None: ``timeout``.
        """
        self.link = rpcclient.ConductorLink(
            transport, version_cap=version_cap, timeout=timeout,
            topic=topic, exchange=exchange,
            release_objects=release_objects,
            conductor_version=conductor_version)
        self.timeout = timeout
        self.status_timeout = status_timeout
        self.agent_topic = agent_topic

    @property
    def conductor_version(self):
        return self.link.conductor_version

    def _route(self):
        return self.link.route(RECORDS, self.agent_topic)

    def _call(self, ctxt, method, timeout=None, version='1.0',
              newer_kwargs=None, **kwargs):
        return self.link.call(RECORDS, ctxt, method, timeout=timeout,
                              version=version, newer_kwargs=newer_kwargs,
                              topic=self.agent_topic, **kwargs)

    def _cast(self, ctxt, method, version, **kwargs):
        self._route().client.prepare(version=version).cast(
            ctxt, method, **kwargs)

    def serves_release_2(self):
        """Whether the conductor (and the cap) take release 2's calls."""
        return self._route().namespaced

    def wait_until_ready(self, ctxt, attempt_timeout=5, max_attempts=None):
        """Block until a conductor answers; agents call it at start (see
        rpcclient.ConductorLink.wait_until_ready).

        :raises MessagingTimeout: after ``max_attempts`` unanswered tries.
        """
        self.link.wait_until_ready(ctxt, attempt_timeout, max_attempts)
        if self.agent_topic and not self.serves_release_2():
            LOG.info("The conductor serves release 1's API only: agent "
                     "calls go to topic %s", self.link.topic)

    # -- reports --------------------------------------------------------------

    def report_compute_node(self, ctxt, report, timeout=None):
        """Send a report and wait until it is stored (``timeout``: seconds,
        default the client's).

        Sent with the guard's state to a conductor of release 2; one of
        release 1 gets it at 1.0 without the state. While the conductor
        is older than this client's release it is asked its service
        version again first (one ping per periodic report), so that an
        agent follows its conductor's upgrade.
        """
        if self.link.release_objects is None and self.link.older():
            self.link.ask_version(ctxt, timeout or self.timeout)
        route = self._route()
        if route.namespaced:
            return self.link.send(route, ctxt, 'report_compute_node',
                                  RECORDS.version, timeout, report=report)
        return self.link.send(route, ctxt, 'report_compute_node', '1.0',
                              timeout, report=_report_1_0(report))

    def report_compute_node_cast(self, ctxt, report):
        """Send a report without waiting (cast): the reports an agent
        sends after a guest arrived or left, off every migration's path;
        a lost one is replaced by the next periodic report."""
        if self.serves_release_2():
            self._cast(ctxt, 'report_compute_node', RECORDS.version,
                       report=report)
            return
        self._cast(ctxt, 'report_compute_node', '1.0',
                   report=_report_1_0(report))

    # -- reads ----------------------------------------------------------------

    def compute_node_get_all(self, ctxt):
        """Every host's stored report (an agent reads its peers')."""
        return self._call(ctxt, 'compute_node_get_all')

    def instance_get(self, ctxt, instance_uuid):
        return self._call(ctxt, 'instance_get', instance_uuid=instance_uuid)

    def instance_get_all_by_host(self, ctxt, host):
        return self._call(ctxt, 'instance_get_all', host=host)

    def instance_get_claims_on_host(self, ctxt, host):
        """Instances holding a claim on ``host`` (in-progress migrations)."""
        return self._call(ctxt, 'instance_get_claims_on_host', host=host)

    def migration_get(self, ctxt, migration_uuid):
        return self._call(ctxt, 'migration_get',
                          migration_uuid=migration_uuid)

    def migration_get_with_satellites(self, ctxt, migration_uuid, names,
                                      timeout=None):
        """A migration and its satellite records ``names`` (some of
        numamig.objects.migration_satellites.AGENT_SATELLITES), read in
        one transaction and answered in one round trip (release 2).

        :returns: (Migration, {name: object}), each satellite empty where
            nothing was recorded.
        :raises UnsupportedVersion: the conductor or the cap is of
            release 1 (nothing sent): the caller reads ``migration_get``
            instead; that conductor records no satellite (its Migration
            1.0 has neither a convergence policy nor a recovery history).
        """
        if not self.serves_release_2():
            raise messaging.UnsupportedVersion(RECORDS.version)
        answer = self.link.send(self._route(), ctxt,
                                'migration_get_with_satellites',
                                RECORDS.version, timeout or self.timeout,
                                migration_uuid=migration_uuid,
                                names=list(names))
        return answer['migration'], dict(answer['satellites'])

    def migration_get_in_progress_by_host(self, ctxt, host):
        return self._call(ctxt, 'migration_get_in_progress_by_host',
                          host=host)

    # -- instances and claims -------------------------------------------------

    def instance_set_placement(self, ctxt, instance_uuid, host,
                               numa_topology):
        """Record where an instance runs and how it is placed there."""
        return self._call(ctxt, 'instance_set_placement',
                          instance_uuid=instance_uuid, host=host,
                          numa_topology=numa_topology)

    def instance_update(self, ctxt, instance_uuid, values):
        return self._call(ctxt, 'instance_update',
                          instance_uuid=instance_uuid, values=values)

    def migration_context_set(self, ctxt, context):
        """Record a move claim; answers only once it is committed.

        :raises MigrationPreCheckError: the migration no longer tries
            this destination, or the instance holds another claim.
        """
        return self._call(ctxt, 'migration_context_set', context=context)

    def migration_context_drop(self, ctxt, instance_uuid, migration_uuid,
                               dest_host=None):
        """Drop a migration's claim; with ``dest_host``, only if held there.

        A conductor capped below 1.1 is not sent ``dest_host`` and drops
        the migration's claim wherever it is held, as 1.0 did.
        """
        kwargs = {'instance_uuid': instance_uuid,
                  'migration_uuid': migration_uuid}
        if dest_host is not None and self._route().allows(
                api_versions.RELEASE_1):
            return self._call(ctxt, 'migration_context_drop',
                              version=api_versions.RELEASE_1,
                              dest_host=dest_host, **kwargs)
        return self._call(ctxt, 'migration_context_drop', **kwargs)

    def migration_context_apply(self, ctxt, instance_uuid, migration_uuid):
        return self._call(ctxt, 'migration_context_apply',
                          instance_uuid=instance_uuid,
                          migration_uuid=migration_uuid)

    # -- a migration's run (its source) ---------------------------------------

    def migration_set_status(self, ctxt, migration_uuid, status,
                             detail=None, error=None, result=None,
                             timeout=None):
        """Record a status change, with the run's result if given.

        :param result: the driver's MigrationResult as a dict, recorded
            with the change; not sent to a conductor of release 1 (the
            change is recorded without it).
        :param timeout: seconds to wait for the answer (None: the
            client's status_timeout); an agent asking again after a lost
            answer waits growing shares (numamig.compute.patience).
        :returns: the Migration after the change, its ``history`` unset
            (migration_get reads it).
        :raises InvalidStatusTransition: nothing changed then.
        :raises UnsupportedVersion: ``status`` is postcopy-paused and the
            cap or the conductor is release 1 (nothing recorded).
        """
        if status == 'postcopy-paused' and not self.serves_release_2():
            # An older conductor cannot parse it.
            raise messaging.UnsupportedVersion(RECORDS.version)
        return self._call(ctxt, 'migration_set_status',
                          migration_uuid=migration_uuid, status=status,
                          detail=detail, error=error,
                          newer_kwargs=None if result is None
                          else {'result': result},
                          timeout=timeout or self.status_timeout)

    def supports_short_path(self):
        """Whether the one-step status calls of release 2 may be sent."""
        return self.serves_release_2()

    def migration_set_running(self, ctxt, migration_uuid, timeout=None):
        """Move a migration queued -> running in one step (release 2).

        :raises UnsupportedVersion: the conductor or the cap is of
            release 1 (nothing sent): the caller walks queued ->
            preparing -> running instead.
        :raises InvalidStatusTransition: nothing changed then.
        """
        return self._send_short_path(
            ctxt, 'migration_set_status', timeout,
            migration_uuid=migration_uuid, status='running', detail=None,
            error=None)

    def migration_complete(self, ctxt, migration_uuid, result=None,
                           detail=None, timeout=None):
        """Record ``completed`` with the run's result and apply the claim
        in one call and one transaction (release 2); idempotent.

        :returns: the Migration, its ``history`` unset.
        :raises UnsupportedVersion: the conductor or the cap is of
            release 1 (nothing sent): the caller records post-migrating,
            applies the claim and records completed, as release 1 did.
        :raises InvalidStatusTransition: the migration ended otherwise.
        """
        return self._send_short_path(ctxt, 'migration_complete', timeout,
                                     migration_uuid=migration_uuid,
                                     result=result, detail=detail)

    def _send_short_path(self, ctxt, method, timeout, **kwargs):
        if not self.supports_short_path():
            raise messaging.UnsupportedVersion(RECORDS.version)
        return self.link.send(self._route(), ctxt, method, RECORDS.version,
                              timeout or self.status_timeout, **kwargs)

    def migration_update_progress(self, ctxt, migration_uuid, progress):
        """Record a progress sample (cast: a lost sample does not matter)."""
        version = RECORDS.version if self.serves_release_2() else '1.0'
        self._cast(ctxt, 'migration_update_progress', version,
                   migration_uuid=migration_uuid, progress=progress)

    def migration_record_recovery(self, ctxt, migration_uuid, history):
        """Record a post-copy recovery's history (cast, release 2; each
        report carries the whole history, so a lost one is made good by
        the next and by the run's result).

        :returns: False when the conductor or the cap is of release 1
            (nothing sent).
        """
        if not self.serves_release_2():
            return False
        self._cast(ctxt, 'migration_record_recovery', RECORDS.version,
                   migration_uuid=migration_uuid, history=history)
        return True

    def migration_record_threads(self, ctxt, migration_uuid, side, record):
        """Record where one host's migration threads ran (cast, release 2;
        ``side`` is 'source' or 'dest', ``record`` that host's part of
        MigrationThreads.sides).

        :returns: False when the conductor or the cap is of release 1
            (nothing sent).
        """
        if not self.serves_release_2():
            return False
        self._cast(ctxt, 'migration_record_threads', RECORDS.version,
                   migration_uuid=migration_uuid, side=side, record=record)
        return True

    def migration_record_devices(self, ctxt, migration_uuid, host,
                                 devices):
        """Record the destination's verification of the guest's
        passed-through devices after the arrival (cast, release 2;
        ``devices``: numamig.objects.migration_satellites.DEVICE_KEYS
        entries).

        :returns: False when the conductor or the cap is of release 1
            (nothing sent).
        """
        if not self.serves_release_2():
            return False
        self._cast(ctxt, 'migration_record_devices', RECORDS.version,
                   migration_uuid=migration_uuid, host=host,
                   devices=devices)
        return True


def _report_1_0(report):
    """``report`` as ComputeNodeReport 1.0 (no migration guard state)."""
    if report.VERSION == '1.0':
        return report
    primitive = rpc.primitive_for(report, '1.0')
    return type(report).obj_from_primitive(primitive)
