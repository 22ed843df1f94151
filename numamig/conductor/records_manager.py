"""The conductor's records endpoint: what compute agents call.

Agents record their reports, placements, claims and their migrations'
statuses here, and read the records they act on (records.py holds the
rules that keep claims consistent). This is the API a rolling upgrade
depends on (numamig.conductor.api_versions, RECORDS); the client is
numamig.conductor.records_rpcapi. Every endpoint is thin: it checks its
arguments (numamig.wire) and delegates.
"""

from oslo_log import log as logging
import oslo_messaging as messaging

from numamig import exception
from numamig import wire
from numamig.conductor import api_versions
from numamig.conductor import records
from numamig.conductor import requests
from numamig.db import compute_nodes
from numamig.db import instances
from numamig.db import migration_satellites
from numamig.db import migration_threads as db_threads
from numamig.db import migrations
from numamig.objects import fields
from numamig.objects import migration_satellites as satellites_obj
from numamig.objects import migration_threads as record_shape

LOG = logging.getLogger(__name__)

STATUS_KIND = wire.one_of(fields.MigrationStatus.ALL)

# The errors the conductor's endpoints answer with as themselves.
EXPECTED = (exception.MigrationError, exception.Invalid,
            exception.NotFound, exception.ConcurrentUpdate,
            exception.InstanceBuildError)

HISTORY = wire.Kind(
    f"a list of at most {records.MAX_RECOVERY_EVENTS} events",
    lambda v: isinstance(v, list) and
    len(v) <= records.MAX_RECOVERY_EVENTS)
SIDE = wire.one_of(record_shape.SIDES)
# The satellite records an agent may read with a migration: only those
# agents read (a satellite only operators read may change without
# touching this API).
AGENT_SATELLITE_NAMES = wire.Kind(
    f"a list of some of {', '.join(satellites_obj.AGENT_SATELLITES)}",
    lambda v: isinstance(v, list) and
    len(v) <= len(satellites_obj.AGENT_SATELLITES) and
    all(isinstance(n, str) and n in satellites_obj.AGENT_SATELLITES
        for n in v))
THREADS_RECORD = wire.Kind(
    f"one host's record of at most {record_shape.MAX_THREADS} threads "
    f"and {record_shape.MAX_CPUS} CPUs per list "
    f"({', '.join(record_shape.KEYS)})",
    lambda v: record_shape.side_problem(v) is None)
DEVICES = wire.Kind(
    f"a list of 1 to {satellites_obj.MAX_DEVICES} devices "
    f"({', '.join(satellites_obj.DEVICE_KEYS)})",
    lambda v: satellites_obj.devices_problem('host', v) is None)


class RecordManager:
    """The records API's endpoint (namespace ``records``).

    Only the methods declared with ``wire.args`` are callable over RPC.

    :param worker: the conductor worker's parts (numamig.conductor.worker).
    """

    target = messaging.Target(namespace=api_versions.RECORDS.namespace,
                              version=api_versions.RECORDS.version)
    # Dispatch only to the methods declared with wire.args.
    wire_declared = True

    def __init__(self, worker):
        self.worker = worker

    @property
    def db(self):
        return self.worker.db

    # -- reports --------------------------------------------------------------

    @wire.args(report=wire.obj('ComputeNodeReport'))
    @messaging.expected_exceptions(*EXPECTED)
    def report_compute_node(self, ctxt, report):
        """Store a host's report and feed it to the scheduler's cache.

        Idempotent: a repeat stores the same report again; one older than
        the stored report (delayed in transit) is ignored. Reports carry
        whole seconds, so two made within one second are not ordered.
        """
        records.save_report(self.worker, report)

    # -- reads ----------------------------------------------------------------

    @wire.args()
    @messaging.expected_exceptions(*EXPECTED)
    def compute_node_get_all(self, ctxt):
        """Idempotent: a repeat reads only and gets the same answer."""
        return compute_nodes.get_all(self.db)

    @wire.args(instance_uuid=wire.UUID)
    @messaging.expected_exceptions(*EXPECTED)
    def instance_get(self, ctxt, instance_uuid):
        """Idempotent: a repeat reads only and gets the same answer."""
        return instances.get(self.db, instance_uuid).instance

    @wire.args(host=wire.HOST.or_none())
    @messaging.expected_exceptions(*EXPECTED)
    def instance_get_all(self, ctxt, host=None):
        """Idempotent: a repeat reads only and gets the same answer."""
        return [r.instance for r in instances.get_all(self.db, host=host)]

    @wire.args(host=wire.HOST)
    @messaging.expected_exceptions(*EXPECTED)
    def instance_get_claims_on_host(self, ctxt, host):
        """Idempotent: a repeat reads only and gets the same answer."""
        return [r.instance for r in
                instances.get_claims_on_host(self.db, host)]

    @wire.args(migration_uuid=wire.UUID)
    @messaging.expected_exceptions(*EXPECTED)
    def migration_get(self, ctxt, migration_uuid):
        """Idempotent: a repeat reads only and gets the same answer."""
        return requests.get(self.db, migration_uuid)

    @wire.args(migration_uuid=wire.UUID, names=AGENT_SATELLITE_NAMES)
    @messaging.expected_exceptions(*EXPECTED)
    def migration_get_with_satellites(self, ctxt, migration_uuid, names):
        """A migration and its satellite records ``names`` (of
        AGENT_SATELLITES), read in one transaction and answered in one
        round trip: {'migration': Migration, 'satellites': {name:
        object}}, each satellite empty where nothing was recorded. An
        agent resuming a post-copy reads its policy and recovery history
        so (numamig.compute.postcopy_paused).

        Idempotent: a repeat reads only and gets the same answer.
        """
        with self.db.reader() as session:
            migration = migrations.get_in(session, migration_uuid)
            found = migration_satellites.get_in(session, migration_uuid,
                                                names)
        return {'migration': requests.with_position(self.db, migration),
                'satellites': found}

    @wire.args(host=wire.HOST)
    @messaging.expected_exceptions(*EXPECTED)
    def migration_get_in_progress_by_host(self, ctxt, host):
        """Idempotent: a repeat reads only and gets the same answer."""
        return migrations.get_in_progress_by_host(self.db, host)

    # -- instances and claims -------------------------------------------------

    @wire.args(instance_uuid=wire.UUID, host=wire.HOST.or_none(),
               numa_topology=wire.obj('InstanceNUMATopology').or_none())
    @messaging.expected_exceptions(*EXPECTED)
    def instance_set_placement(self, ctxt, instance_uuid, host,
                               numa_topology):
        """Record where an instance runs and its placement there; a host
        of None (and no topology) says it runs nowhere: an agent whose
        build failed after recording the placement.

        Idempotent: a repeat finds it recorded and writes nothing (the
        revision stays).
        """
        return records.set_placement(self.worker, instance_uuid, host,
                                     numa_topology)

    @wire.args(instance_uuid=wire.UUID, values=wire.mapping(16))
    @messaging.expected_exceptions(*EXPECTED)
    def instance_update(self, ctxt, instance_uuid, values):
        """Change an instance's power or task state.

        Idempotent: a repeat finds it recorded and writes nothing (the
        revision stays).
        """
        return records.update_instance(self.worker, instance_uuid, values)

    @wire.args(context=wire.obj('MigrationContext'))
    @messaging.expected_exceptions(*EXPECTED)
    def migration_context_set(self, ctxt, context):
        """Record a destination's move claim (compute API 1.1 path).

        Idempotent: a repeat finds the claim recorded and writes nothing;
        one that comes after the migration ended or moved on to another
        destination is refused (MigrationPreCheckError), changing nothing.
        """
        records.set_migration_context(self.worker, context)

    @wire.args(instance_uuid=wire.UUID, migration_uuid=wire.UUID,
               dest_host=wire.HOST.or_none())
    @messaging.expected_exceptions(*EXPECTED)
    def migration_context_drop(self, ctxt, instance_uuid, migration_uuid,
                               dest_host=None):
        """Drop a claim; with ``dest_host`` only the one held there.

        Idempotent: a repeat, or one after the claim was applied or
        replaced, finds nothing held and answers False.
        """
        return instances.drop_migration_context(
            self.db, instance_uuid, migration_uuid, claim_host=dest_host)

    @wire.args(instance_uuid=wire.UUID, migration_uuid=wire.UUID)
    @messaging.expected_exceptions(*EXPECTED)
    def migration_context_apply(self, ctxt, instance_uuid, migration_uuid):
        """Make the claim the instance's placement and drop it.

        Idempotent: a repeat, or one after the claim was dropped, is refused
        (MigrationContextConflict) and changes nothing.
        """
        return instances.apply_migration_context(
            self.db, instance_uuid, migration_uuid).instance

    # -- a migration's run ----------------------------------------------------

    @wire.args(migration_uuid=wire.UUID, status=STATUS_KIND,
               detail=wire.TEXT.or_none(), error=wire.TEXT.or_none(),
               result=wire.mapping(32).or_none())
    @messaging.expected_exceptions(*EXPECTED)
    def migration_set_status(self, ctxt, migration_uuid, status,
                             detail=None, error=None, result=None):
        """Record a status change (from release 2 a source moves a
        migration queued -> running in one step).

        Idempotent: a repeat is refused (InvalidStatusTransition) and
        changes nothing, as is a change that comes after the migration
        moved past it (running after it completed); a sender whose first
        request's answer was lost reads the status and counts it done
        (SourceMigration._set_status).
        """
        return records.set_status(self.worker, migration_uuid, status,
                                  detail=detail, error=error, result=result)

    @wire.args(migration_uuid=wire.UUID,
               result=wire.mapping(32).or_none(),
               detail=wire.TEXT.or_none())
    @messaging.expected_exceptions(*EXPECTED)
    def migration_complete(self, ctxt, migration_uuid, result=None,
                           detail=None):
        """``completed``, the run's result and the applied claim, in one
        transaction (release 2).

        Idempotent: a repeat finds the migration completed and returns
        it, changing nothing.
        """
        return records.complete(self.worker, migration_uuid, result=result,
                                detail=detail)

    @wire.args(migration_uuid=wire.UUID, progress=wire.mapping(16))
    def migration_update_progress(self, ctxt, migration_uuid, progress):
        """Record a progress sample (a cast).

        Idempotent: a repeat records the same values; a sample older than
        the recorded one (less memory copied), or one that comes after the
        migration ended, is ignored.
        """
        fields_ = {k: v for k, v in progress.items()
                   if k in migrations.PROGRESS_FIELDS}
        migrations.update_progress(self.db, migration_uuid, **fields_)

    @wire.args(migration_uuid=wire.UUID, history=HISTORY)
    def migration_record_recovery(self, ctxt, migration_uuid, history):
        """Record a post-copy recovery's history (a cast): the guest is
        paused meanwhile, so the operator is told at once, not when the
        run ends (whose result carries the history again).

        Idempotent: a repeat, or a report overtaken by a later one (a
        shorter history), changes nothing; so does one for a migration
        that has ended.
        """
        try:
            if records.record_recovery(self.db, migration_uuid, history):
                LOG.info("Migration %s: post-copy recovery: %s",
                         migration_uuid, _last(history))
        except (exception.InvalidMigrationResult,
                exception.MigrationNotFound) as exc:
            LOG.warning("Recovery history of %s not recorded: %s",
                        migration_uuid, exc)

    @wire.args(migration_uuid=wire.UUID, side=SIDE, record=THREADS_RECORD)
    def migration_record_threads(self, ctxt, migration_uuid, side, record):
        """Record one host's side of where a migration's threads ran (a
        cast, checked for shape and size here so that a host cannot make
        the record grow without bound).

        Idempotent: a repeat changes nothing.
        """
        try:
            if db_threads.record_threads(self.db, migration_uuid, side,
                                         record):
                LOG.info("Migration %s: %s threads: %s", migration_uuid,
                         side, record_shape.describe(record))
        except (exception.InvalidMigrationResult,
                exception.MigrationNotFound) as exc:
            LOG.warning("Where the threads of %s ran was not recorded: %s",
                        migration_uuid, exc)

    @wire.args(migration_uuid=wire.UUID, host=wire.HOST, devices=DEVICES)
    def migration_record_devices(self, ctxt, migration_uuid, host,
                                 devices):
        """Record the destination's verification, after the arrival, of
        the guest's passed-through devices (a cast; told as
        ``instance.devices.verified`` once committed).

        Idempotent: a repeat (a redelivered cast, a redelivered arrival)
        changes nothing and tells nothing.
        """
        try:
            if migration_satellites.record_devices(self.db, migration_uuid,
                                                   host, devices):
                LOG.info("Migration %s: %s verified %d device(s): %s",
                         migration_uuid, host, len(devices),
                         'all local' if all(d['local'] == 'yes'
                                            for d in devices) else
                         'NOT all plugged and local')
        except (exception.InvalidMigrationResult,
                exception.MigrationNotFound) as exc:
            LOG.warning("The device verification of %s was not "
                        "recorded: %s", migration_uuid, exc)


def _last(history):
    event = history[-1] if history else {}
    return ', '.join(f"{k} {v}" for k, v in event.items() if v is not None)
