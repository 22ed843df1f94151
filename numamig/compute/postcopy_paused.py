"""A post-copy migration whose recovery gave up: ending it paused, and
resuming it when an operator asks.

When the migration stream breaks during post-copy and recovery gives up
(numamig.virt.libvirt.postcopy raises PostCopyPaused), the guest is
split: the destination's QEMU holds its CPU state, its pinned pCPUs and
the pages sent, the source's QEMU the pages not yet sent. Neither half
may be rolled back or given away, so the migration is recorded
``postcopy-paused``: a non-final status in which the conductor keeps
both hosts' claims (the source keeps counting the guest, the
destination its claim) until an operator resumes it
(``numamig-manage migration resume``). A conductor of release 1
cannot record that status; the migration then ends ``error`` as it did
before, and that conductor releases the destination's claim.

A resume is one more recovery run (the configured attempts and timeout,
VIR_MIGRATE_POSTCOPY_RESUME) in the agent's migration executor. The
conductor moves the migration postcopy-paused -> running before it asks
the source, so a repeated request finds it running and starts nothing.
The run asks the destination what its paused half runs (its domain XML
and where to reach it: compute API 1.7) rather than remembering what the
first run sent, so that a resume also works after this agent restarted.
It ends ``completed`` as a normal run does (the destination's claim
becomes the instance's placement, this host stops counting the guest),
or back ``postcopy-paused`` with the attempt in the recovery history.
"""

import time

from oslo_log import log as logging
import oslo_messaging as messaging

from numamig import exception
from numamig.compute import completion
from numamig.compute import migration_source
from numamig.compute import report
from numamig.objects import fields
from numamig.objects import migration_satellites as satellites_obj

LOG = logging.getLogger(__name__)
STATUS = fields.MigrationStatus

# Progress of a resumed run is written at most this often.
PROGRESS_INTERVAL_S = migration_source.PROGRESS_INTERVAL_S
# The satellite records a resume reads with the migration.
RESUME_READS = ('convergence', 'recovery')


def end_paused(run, exc):
    """Record ``postcopy-paused`` for a SourceMigration whose recovery
    gave up (``exc``, a PostCopyPaused), with what the run measured and
    its recovery history; nothing is rolled back or released."""
    agent = run.agent
    LOG.error("%s: migration %s of %s: %s", agent.host, run.migration.uuid,
              run.instance.uuid, exc)
    result = _paused_result(run._measured(emulated=False), run._recovery)
    try:
        run._set_status(STATUS.POSTCOPY_PAUSED, error=str(exc),
                        result=result)
    except messaging.UnsupportedVersion:
        agent.flows.log_old_path(
            agent.host, run.migration.uuid, 'postcopy-paused status',
            "the conductor is of release 1: the migration ends "
            "error and that conductor releases the destination's claim",
            level=logging.WARNING)
        run._set_status(STATUS.ERROR, error=str(exc), result=result)


def _paused_result(measured, history):
    result = dict(measured or {})
    result['post_copy'] = True
    if history:
        result['postcopy_recovery'] = history
    return result


def accept_resume(agent, ctxt, instance, migration, submit):
    """The source's side of ``resume_postcopy``: check the guest waits
    here paused in a broken post-copy, then hand a PausedResume to
    ``submit`` (the migration executor) and return at once.

    :returns: True if a run started, False if one already runs here (a
        repeated request: nothing more is started).
    :raises MigrationNotResumable: nothing to resume here.
    """
    if migration.uuid in agent.outgoing.uuids():
        LOG.info("%s: migration %s is already being resumed here; the "
                 "repeated request is ignored", agent.host, migration.uuid)
        return False
    # The conductor records running before it asks: a request delivered
    # again after its run ended (paused again, or completed) is stale.
    current = agent.conductor_api.migration_get(ctxt, migration.uuid)
    if current.status != STATUS.RUNNING:
        LOG.info("%s: migration %s is %s: the resume request is a "
                 "repeated one and is ignored", agent.host, migration.uuid,
                 current.status)
        return False
    if not agent.driver.supports_native_migration or \
            instance.uuid not in agent.driver.list_guests() or \
            not agent.driver.postcopy_paused(instance.uuid):
        raise exception.MigrationNotResumable(
            migration_uuid=migration.uuid, status=migration.status,
            reason=f"guest {instance.uuid} is not paused in a broken "
                   f"post-copy on source host {agent.host}")
    job = PausedResume(agent, ctxt, instance, migration)
    if not agent.outgoing.register(job):
        return False
    try:
        submit(job)
    except RuntimeError:
        agent.outgoing.unregister(migration.uuid)
        raise exception.MigrationNotResumable(
            migration_uuid=migration.uuid, status=migration.status,
            reason=f"the agent on {agent.host} is stopping")
    return True


def resume_target(agent, instance, migration):
    """The destination's side of ``postcopy_resume_target``: what the
    source resumes into (see ComputeDriver.resume_postcopy).

    :raises MigrationNotResumable: no half of the guest is here.
    """
    if instance.uuid not in agent.driver.list_guests():
        raise exception.MigrationNotResumable(
            migration_uuid=migration.uuid, status=migration.status,
            reason=f"destination {agent.host} has no paused half of guest "
                   f"{instance.uuid}")
    connect_uri, migration_uri = agent.driver.migration_target()
    return {'dest_connect_uri': connect_uri, 'migration_uri': migration_uri,
            'xml': agent.driver.get_destination_xml(instance.uuid, None)}


def read_with_satellites(agent, ctxt, migration_uuid, names):
    """The migration and its satellite records ``names`` in one round
    trip (the records API's migration_get_with_satellites, release 2).

    A conductor of release 1 has no such call: it is asked
    ``migration_get`` (one round trip too) and the satellites are empty,
    as it records none (nor can it record a migration postcopy-paused:
    a resume that reaches it was asked of a conductor upgraded since).

    :returns: (Migration, {name: satellite object}).
    """
    try:
        return agent.conductor_api.migration_get_with_satellites(
            ctxt, migration_uuid, names)
    except messaging.UnsupportedVersion:
        migration = agent.conductor_api.migration_get(ctxt, migration_uuid)
        return migration, {name: satellites_obj.SATELLITES[name](
            migration_uuid=migration_uuid) for name in names}


class PausedResume:
    """One operator-requested resume of a postcopy-paused migration, run
    in the agent's migration executor (registered in agent.outgoing like
    a SourceMigration, so that the periodic reconciliation leaves it)."""

    def __init__(self, agent, ctxt, instance, migration):
        self.agent = agent
        self.ctxt = ctxt
        self.instance = instance
        self.migration = migration
        self._history = None
        self._last_progress = 0.0

    def abort(self):
        """Nothing can be aborted: neither half is the guest."""
        return False

    def run(self):
        """Resume; never raises (its caller is the executor)."""
        agent = self.agent
        try:
            result = self._resume()
        except exception.PostCopyPaused as exc:
            self._paused_again(str(exc))
            return
        except Exception as exc:  # noqa: BLE001 - recorded, guest paused
            LOG.error("%s: resume of migration %s did not run: %s",
                      agent.host, self.migration.uuid, exc)
            self._paused_again(f"resume did not run: "
                               f"{exception.brief(exc)}")
            return
        try:
            completion.complete(
                agent, self.ctxt, self.instance, self.migration,
                result=result, detail=f"resumed by request, completed "
                                      f"from {agent.host}")
        except Exception as exc:  # noqa: BLE001 - reconciliation ends it
            LOG.error("%s: migration %s resumed, the guest runs on %s, "
                      "but completing it failed (%s); the reconciliation "
                      "completes it", agent.host, self.migration.uuid,
                      self.migration.dest_host, exc)
            return
        report.request(agent, f"the departure of {self.instance.uuid}")
        LOG.info("%s: migration %s of %s resumed and completed",
                 agent.host, self.migration.uuid, self.instance.uuid)

    def _resume(self):
        """:returns: the run's result (a dict)."""
        agent = self.agent
        # The recovery history so far and the policy the run chose:
        # MigrationRecovery and MigrationConvergence, satellite records.
        _recorded, found = read_with_satellites(
            agent, self.ctxt, self.migration.uuid, RESUME_READS)
        self._history = list(found['recovery'].get('events') or [])
        target = dict(agent.compute_api.postcopy_resume_target(
            self.ctxt, self.instance, self.migration),
            dest_host=self.migration.dest_host)
        policy, _where = migration_source.choose_policy(
            agent.driver, self.instance, found['convergence'].get('policy'))
        result = agent.driver.resume_postcopy(
            self.instance.uuid, target, self._history, policy=policy,
            progress_callback=self._progress,
            recovery_callback=self._recovery_report,
            reason="resume requested by an operator")
        result = result.as_dict()
        if result.get('postcopy_recovery') is None:
            result.pop('postcopy_recovery', None)
        return result

    def _paused_again(self, error):
        result = {'post_copy': True}
        if self._history:
            result['postcopy_recovery'] = self._history
        try:
            self.migration = self.agent.conductor_api.migration_set_status(
                self.ctxt, self.migration.uuid, STATUS.POSTCOPY_PAUSED,
                error=error, result=result)
        except Exception as exc:  # noqa: BLE001 - reconciliation ends it
            LOG.error("%s: migration %s: postcopy-paused not recorded "
                      "(%s); the reconciliation records it",
                      self.agent.host, self.migration.uuid, exc)

    def _recovery_report(self, history):
        self._history = history
        completion.record_recovery(self.agent, self.ctxt, self.migration,
                                   history)

    def _progress(self, sample):
        now = time.monotonic()
        if now - self._last_progress < PROGRESS_INTERVAL_S:
            return
        self._last_progress = now
        try:
            self.agent.conductor_api.migration_update_progress(
                self.ctxt, self.migration.uuid, sample.as_dict())
        except Exception as exc:  # noqa: BLE001 - progress is advisory
            LOG.debug("progress of %s not recorded: %s",
                      self.migration.uuid, exc)
