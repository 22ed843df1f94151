"""The conductor client's calls a source agent makes while it runs a
migration, mixed into ConductorAPI.

Status changes (with the run's result), the one-step ``running`` and
``completed`` of release 2 (API 1.2), progress samples, the post-copy
recovery's history and where the migration's threads ran: apart from
numamig.conductor.rpcapi so that the client stays one readable module.
A conductor of release 1 is sent none of release 2's calls or
arguments.
"""

import oslo_messaging as messaging

from numamig.conductor.api_versions import RELEASE_2


class RunCalls:
    """Needs ``client``, ``status_timeout``, ``_call`` and ``_send`` of
    ConductorAPI."""

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
        # The result goes at release 2's version only, with every field
        # it has (release 1 takes none).
        newer = None if result is None else {'result': result}
        version = '1.0'
        if status == 'postcopy-paused':
            # An older conductor cannot parse it.
            if not self.client.can_send_version(RELEASE_2):
                raise messaging.UnsupportedVersion(RELEASE_2)
            version = RELEASE_2
        return self._call(ctxt, 'migration_set_status',
                          migration_uuid=migration_uuid, status=status,
                          detail=detail, error=error, newer_kwargs=newer,
                          timeout=timeout or self.status_timeout,
                          version=version)

    def supports_short_path(self):
        """Whether the cap lets the 1.3 status calls be sent at all."""
        return self.client.can_send_version(RELEASE_2)

    def migration_set_running(self, ctxt, migration_uuid, timeout=None):
        """Move a migration queued -> running in one step (release 2).

        :raises UnsupportedVersion: capped below 1.3, or the conductor is
            older (nothing sent): the caller walks queued -> preparing ->
            running instead.
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
        :raises UnsupportedVersion: capped below 1.3, or the conductor is
            older (nothing sent): the caller records post-migrating,
            applies the claim and records completed, as before 1.3.
        :raises InvalidStatusTransition: the migration ended otherwise.
        """
        return self._send_short_path(ctxt, 'migration_complete', timeout,
                                     migration_uuid=migration_uuid,
                                     result=result,
                                     detail=detail)

    def _send_short_path(self, ctxt, method, timeout, **kwargs):
        if not self.supports_short_path():
            raise messaging.UnsupportedVersion(RELEASE_2)
        return self._send(ctxt, method, RELEASE_2,
                          timeout or self.status_timeout, **kwargs)

    def migration_record_recovery(self, ctxt, migration_uuid, history):
        """Record a post-copy recovery's history (cast, release 2; each
        report carries the whole history, so a lost one is made good by
        the next and by the run's result).

        :returns: False where the cap forbids release 2 (nothing sent).
        """
        if not self.client.can_send_version(RELEASE_2):
            return False
        self.client.prepare(
            version=RELEASE_2).cast(
            ctxt, 'migration_record_recovery',
            migration_uuid=migration_uuid, history=history)
        return True

    def migration_record_threads(self, ctxt, migration_uuid, side, record):
        """Record where one host's migration threads ran (cast, release 2;
        ``side`` is 'source' or 'dest', ``record`` that host's part of
        Migration.migration_threads).

        :returns: False where the cap forbids release 2 (nothing sent).
        """
        if not self.client.can_send_version(RELEASE_2):
            return False
        self.client.prepare(
            version=RELEASE_2).cast(
            ctxt, 'migration_record_threads', migration_uuid=migration_uuid,
            side=side, record=record)
        return True

    def migration_update_progress(self, ctxt, migration_uuid, progress):
        """Record a progress sample (cast: a lost sample does not matter)."""
        self.client.cast(ctxt, 'migration_update_progress',
                         migration_uuid=migration_uuid, progress=progress)
