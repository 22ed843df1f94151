"""The conductor's endpoints for a post-copy recovery: its history while
it recovers, and an operator's resume once it gave up.

A source whose post-copy migration lost its stream resumes it
(numamig.virt.libvirt.postcopy); meanwhile the guest is paused, so the
operator must be told at once, not when the run ends. The source casts
the recovery history each time it grows (API 1.15); the run's result
carries it again at the end.
"""

from oslo_log import log as logging
import oslo_messaging as messaging

from numamig import exception
from numamig import wire
from numamig.conductor import records
from numamig.conductor.tasks import resume

LOG = logging.getLogger(__name__)

HISTORY = wire.Kind(
    f"a list of at most {records.MAX_RECOVERY_EVENTS} events",
    lambda v: isinstance(v, list) and
    len(v) <= records.MAX_RECOVERY_EVENTS)


# How many times a migration was paused: bounded by its history's.
PAUSES = wire.integer(0, 10000)


class RecoveryEndpoints:
    """The manager sets ``db`` and ``worker``."""

    @wire.args(migration_uuid=wire.UUID, pauses=PAUSES.or_none())
    @messaging.expected_exceptions(exception.MigrationError,
                                   exception.Invalid, exception.NotFound)
    def migration_resume(self, ctxt, migration_uuid, pauses=None):
        """Ask the source to resume a postcopy-paused migration (1.17).

        Idempotent: a repeat finds it running (or completed, or paused
        again since the ``pauses`` the caller saw) and answers so,
        starting nothing; see numamig.conductor.tasks.resume.

        :returns: {'migration': Migration, 'outcome': resume.OUTCOMES}.
        """
        return resume.ResumeTask(ctxt, self.worker, migration_uuid,
                                 seen_pauses=pauses).execute()

    @wire.args(migration_uuid=wire.UUID, history=HISTORY)
    def migration_record_recovery(self, ctxt, migration_uuid, history):
        """Record a post-copy recovery's history (a cast).

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


def _last(history):
    event = history[-1] if history else {}
    return ', '.join(f"{k} {v}" for k, v in event.items() if v is not None)
