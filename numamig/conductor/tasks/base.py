"""TaskBase: a conductor task that runs its steps or rolls back."""

import abc

from oslo_log import log as logging

from numamig import exception

LOG = logging.getLogger(__name__)


class TaskBase(abc.ABC):
    """A unit of conductor work: ``execute`` runs ``_execute``; on any
    exception ``rollback`` undoes what was done and the exception is
    raised again unchanged.
    """

    def __init__(self, ctxt, worker):
        """:param worker: the conductor's Worker (database, cache, APIs)."""
        self.ctxt = ctxt
        self.worker = worker

    def execute(self):
        """:raises DatabaseError: from the rollback, when it could not
            record the outcome for want of the database: the caller must
            learn that nothing was recorded, whatever failed first."""
        try:
            return self._execute()
        except BaseException as exc:
            try:
                self.rollback(exc)
            except exception.DatabaseError as unrecorded:
                if not isinstance(exc, exception.DatabaseError):
                    LOG.warning("%s failed (%s) and its rollback could not "
                                "record it: %s", type(self).__name__,
                                exception.brief(exc)
                                if isinstance(exc,
                                              exception.NumamigException)
                                else exc, exception.brief(unrecorded))
                    raise unrecorded from exc
            except Exception:
                LOG.exception("Rollback of %s failed", type(self).__name__)
            raise

    @abc.abstractmethod
    def _execute(self):
        """Do the task's work; subclasses define it."""

    def rollback(self, exc):  # noqa: B027 - an optional hook
        """Undo the effects of a failed ``_execute``; default: nothing."""
