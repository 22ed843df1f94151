"""The task of an operator's resume of a postcopy-paused migration
(API 1.17).

A migration is ``postcopy-paused`` when its post-copy lost the stream
and the source's recovery gave up: the guest is paused, split between
the hosts, both claims kept (numamig.compute.postcopy_paused). Resuming
asks the source for one more recovery run. The conductor moves the
migration postcopy-paused -> running first, conditionally, then asks the
source (compute API 1.7), so that:

* a request delivered twice (or sent again after a lost answer) finds
  it running and starts nothing: ``already-resuming``; one delivered
  again after the run it started ended postcopy-paused again is known by
  ``pauses`` (how many times the caller saw it paused: its history's
  postcopy-paused entries) and starts nothing either:
  ``already-resumed``;
* one for a migration that completed meanwhile answers
  ``already-completed``; neither changes anything;
* a source that refuses (its guest is not paused in a broken post-copy,
  or its agent is older than compute API 1.7) changes nothing either:
  the migration goes back to postcopy-paused (the task's rollback), the
  refusal is raised;
* a source that does not answer leaves it running: its agent, once
  back, finds the guest still paused and records postcopy-paused again
  (numamig.compute.reconcile), or completes it if the guest left.

An abort is refused while the migration is postcopy-paused or being
resumed: neither half is the guest, so there is nothing to go back to.
"""

from oslo_log import log as logging

from numamig import exception
from numamig.conductor import records
from numamig.conductor.tasks import base
from numamig.db import instances
from numamig.db import migrations
from numamig.objects import fields

LOG = logging.getLogger(__name__)
STATUS = fields.MigrationStatus

RESUMING = 'resuming'
ALREADY_RESUMING = 'already-resuming'
ALREADY_RESUMED = 'already-resumed'
ALREADY_COMPLETED = 'already-completed'
OUTCOMES = (RESUMING, ALREADY_RESUMING, ALREADY_RESUMED, ALREADY_COMPLETED)

# Why an abort of a postcopy-paused (or resuming) migration is refused.
NOT_ABORTABLE = ("its guest is paused in a broken post-copy, split "
                 "between source and destination: neither half is the "
                 "guest, so nothing can be rolled back; resume it "
                 "('numamig-manage migration resume'), or give the guest "
                 "up by destroying it on both hosts (see the operator "
                 "guide)")


def pauses(migration):
    """How many times ``migration`` (read with its history) was
    postcopy-paused: what identifies one resume request."""
    return sum(1 for change in migration.get('history') or ()
               if change.status in STATUS.HALTED)


def resuming(migration):
    """Whether ``migration`` (read with its history) is running because
    an operator resumed it after it was postcopy-paused."""
    return migration.status == STATUS.RUNNING and any(
        change.status in STATUS.HALTED
        for change in migration.get('history') or ())


def halted_or_resuming(migration):
    return migration.status in STATUS.HALTED or resuming(migration)


class ResumeTask(base.TaskBase):
    """Ask the source to resume a postcopy-paused migration.

    The rollback sets the migration back to postcopy-paused when, after
    it was moved to running, the source refused the resume; any other
    failure (the source did not answer) leaves it running: the guest
    may be resuming, and the source's agent decides once it is back
    (see the module's docstring).

    :param seen_pauses: ``pauses`` of the migration as the caller read
        it; a request for a pause that has been resumed since starts
        nothing (None: resume whatever pause it is in).
    """

    def __init__(self, ctxt, worker, migration_uuid, seen_pauses=None):
        super().__init__(ctxt, worker)
        self.migration_uuid = migration_uuid
        self.seen_pauses = seen_pauses
        # The Migration as it was paused, while it is running only
        # because this task moved it there and the source has not
        # answered yet.
        self._paused = None

    def _execute(self):
        """:returns: {'migration': Migration, 'outcome': one of OUTCOMES}.
        :raises MigrationNotResumable: not postcopy-paused, or its source
            refused; nothing changed.
        :raises AgentDidNotAnswer: the source did not answer (the
            migration stays running; see the module's docstring).
        """
        worker, migration_uuid = self.worker, self.migration_uuid
        migration = migrations.get(worker.db, migration_uuid)
        settled = _settled_answer(migration)
        if settled is not None:
            return settled
        if self.seen_pauses is not None and \
                self.seen_pauses != pauses(migration):
            return {'migration': migration, 'outcome': ALREADY_RESUMED}
        instance = instances.get(worker.db, migration.instance_uuid).instance
        try:
            # The pause's error goes (a resumed migration that completes
            # is no error); its recovery history keeps why it paused.
            running = records.set_status(
                worker, migration_uuid, STATUS.RUNNING,
                expected=list(STATUS.HALTED), error='',
                detail="post-copy resume requested by an operator")
        except exception.InvalidStatusTransition:
            # Another worker took the same request first (a redelivery).
            return _settled_answer(migrations.get(worker.db,
                                                  migration_uuid))
        self._paused = migration
        started = worker.compute_api.resume_postcopy(
            self.ctxt, instance, running,
            timeout=worker.settings.check_timeout)
        self._paused = None
        LOG.info("Migration %s of %s: resume %s on %s", migration_uuid,
                 migration.instance_uuid,
                 'started' if started else 'already running',
                 migration.source_host)
        return {'migration': migrations.get(worker.db, migration_uuid),
                'outcome': RESUMING if started else ALREADY_RESUMING}

    def rollback(self, exc):
        """Back to postcopy-paused, with the pause's error, when the
        source refused the resume this task asked for."""
        paused, self._paused = self._paused, None
        if paused is not None and \
                isinstance(exc, exception.MigrationNotResumable):
            _back_to_paused(self.worker, self.migration_uuid, exc,
                            paused.error)


def _settled_answer(migration):
    """The answer to a request that has nothing to start; None when the
    migration is postcopy-paused (there is).

    :raises MigrationNotResumable: it is neither paused nor resumed.
    """
    if migration.status in STATUS.HALTED:
        return None
    if migration.status == STATUS.COMPLETED:
        return {'migration': migration, 'outcome': ALREADY_COMPLETED}
    if resuming(migration):
        return {'migration': migration, 'outcome': ALREADY_RESUMING}
    raise exception.MigrationNotResumable(
        migration_uuid=migration.uuid, status=migration.status,
        reason="only a postcopy-paused migration can be resumed (its "
               "post-copy lost the stream and recovery gave up)")


def _back_to_paused(worker, migration_uuid, refusal, error):
    try:
        records.set_status(
            worker, migration_uuid, STATUS.POSTCOPY_PAUSED,
            expected=[STATUS.RUNNING], error=error or '',
            detail=f"resume refused: {exception.brief(refusal)}")
    except exception.InvalidStatusTransition as exc:
        LOG.warning("Migration %s: not set back to postcopy-paused after "
                    "its resume was refused: %s", migration_uuid, exc)
