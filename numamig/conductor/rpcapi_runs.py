"""The conductor client's calls a source agent makes while it runs a
migration, mixed into ConductorAPI.

Status changes (with the run's result), the one-step ``running`` and
``completed`` of API 1.3, progress samples, the post-copy recovery's
history and where the migration's threads ran: apart from
numamig.conductor.rpcapi so that the client stays one readable module.
What an older conductor would refuse is left out of a result when the
cap says it is older.
"""

import oslo_messaging as messaging

from numamig.conductor.api_versions import CONVERGENCE_RESULT_FIELDS
from numamig.conductor.api_versions import CONVERGENCE_VERSION
from numamig.conductor.api_versions import PAUSED_VERSION
from numamig.conductor.api_versions import RECOVERY_RESULT_FIELDS
from numamig.conductor.api_versions import RECOVERY_VERSION
from numamig.conductor.api_versions import SHORT_PATH_VERSION
from numamig.conductor.api_versions import THREADS_VERSION


class RunCalls:
    """Needs ``client``, ``status_timeout``, ``_call``, ``_send`` and
    ``_client_at`` of ConductorAPI."""

    def migration_set_status(self, ctxt, migration_uuid, status,
                             detail=None, error=None, result=None,
                             timeout=None):
        """Record a status change, with the run's result if given.

        :param timeout: seconds to wait for the answer (None: the
            client's status_timeout); an agent asking again after a lost
            answer waits growing shares (numamig.compute.patience).

        :param result: the driver's MigrationResult as a dict, recorded
            with the change; not sent to a conductor older than 1.2 (the
            change is recorded without it).
        :returns: the Migration after the change, its ``history`` unset
            (migration_get reads it).
        :raises InvalidStatusTransition: nothing changed then.
        :raises UnsupportedVersion: ``status`` is postcopy-paused and the
            cap or the conductor is older than 1.17 (nothing recorded).
        """
        newer = None if result is None else {
            'result': self._result_for_cap(result)}
        version = '1.0'
        if status == 'postcopy-paused':
            # An older conductor cannot parse it.
            if not self.client.can_send_version(PAUSED_VERSION):
                raise messaging.UnsupportedVersion(PAUSED_VERSION)
            version = PAUSED_VERSION
        return self._call(ctxt, 'migration_set_status',
                          migration_uuid=migration_uuid, status=status,
                          detail=detail, error=error, newer_kwargs=newer,
                          timeout=timeout or self.status_timeout,
                          version=version)

    def supports_short_path(self):
        """Whether the cap lets the 1.3 status calls be sent at all."""
        return self.client.can_send_version(SHORT_PATH_VERSION)

    def migration_set_running(self, ctxt, migration_uuid, timeout=None):
        """Move a migration queued -> running in one step (API 1.3).

        :raises UnsupportedVersion: capped below 1.3, or the conductor is
            older (it refused before recording anything): the caller
            walks queued -> preparing -> running instead.
        :raises InvalidStatusTransition: nothing changed then.
        """
        return self._send_short_path(
            ctxt, 'migration_set_status', timeout,
            migration_uuid=migration_uuid, status='running', detail=None,
            error=None)

    def migration_complete(self, ctxt, migration_uuid, result=None,
                           detail=None, timeout=None):
        """Record ``completed`` with the run's result and apply the claim
        in one call and one transaction (API 1.3); idempotent.

        :returns: the Migration, its ``history`` unset.
        :raises UnsupportedVersion: capped below 1.3, or the conductor is
            older (nothing recorded): the caller records post-migrating,
            applies the claim and records completed, as before 1.3.
        :raises InvalidStatusTransition: the migration ended otherwise.
        """
        return self._send_short_path(ctxt, 'migration_complete', timeout,
                                     migration_uuid=migration_uuid,
                                     result=self._result_for_cap(result),
                                     detail=detail)

    def _result_for_cap(self, result):
        """``result`` without what an older conductor refuses (before
        1.12 the convergence policy and actions, before 1.15 the
        post-copy recovery: it would refuse the whole result), when the
        cap says the conductor is older."""
        if not isinstance(result, dict):
            return result
        dropped = set()
        if not self.client.can_send_version(CONVERGENCE_VERSION):
            dropped.update(CONVERGENCE_RESULT_FIELDS)
        if not self.client.can_send_version(RECOVERY_VERSION):
            dropped.update(RECOVERY_RESULT_FIELDS)
        return {k: v for k, v in result.items() if k not in dropped}

    def _send_short_path(self, ctxt, method, timeout, **kwargs):
        if not self.supports_short_path():
            raise messaging.UnsupportedVersion(SHORT_PATH_VERSION)
        return self._send(ctxt, method, SHORT_PATH_VERSION,
                          timeout or self.status_timeout, **kwargs)

    def migration_record_recovery(self, ctxt, migration_uuid, history):
        """Record a post-copy recovery's history (cast, API 1.15; each
        report carries the whole history, so a lost one is made good by
        the next and by the run's result).

        :returns: False where the cap forbids 1.15 (nothing sent).
        """
        if not self.client.can_send_version(RECOVERY_VERSION):
            return False
        self._client_at(RECOVERY_VERSION).prepare(
            version=RECOVERY_VERSION).cast(
            ctxt, 'migration_record_recovery',
            migration_uuid=migration_uuid, history=history)
        return True

    def migration_record_threads(self, ctxt, migration_uuid, side, record):
        """Record where one host's migration threads ran (cast, API 1.16;
        ``side`` is 'source' or 'dest', ``record`` that host's part of
        Migration.migration_threads).

        :returns: False where the cap forbids 1.16 (nothing sent).
        """
        if not self.client.can_send_version(THREADS_VERSION):
            return False
        self._client_at(THREADS_VERSION).prepare(
            version=THREADS_VERSION).cast(
            ctxt, 'migration_record_threads', migration_uuid=migration_uuid,
            side=side, record=record)
        return True

    def migration_update_progress(self, ctxt, migration_uuid, progress):
        """Record a progress sample (cast: a lost sample does not matter)."""
        self.client.cast(ctxt, 'migration_update_progress',
                         migration_uuid=migration_uuid, progress=progress)
