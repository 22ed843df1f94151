"""The compute client's calls that resume a postcopy-paused migration,
mixed into ComputeAPI (compute API 1.1, release 2).

Both are calls, never casts: an agent of an older release refuses a
message of an API version it does not serve (UnsupportedVersion, before
any endpoint runs), so the caller gets a refusal naming the host at
once; a cast to it would be dropped and the operator would wait for an
answer that never comes.
"""

import oslo_messaging as messaging

from numamig import exception

# The API version of resume_postcopy and postcopy_resume_target:
# release 2's (numamig.compute.rpcapi.RELEASE_2, which imports this).
RESUME_VERSION = '1.1'


class PostCopyCalls:
    """Needs ``client`` and ``_call`` of ComputeAPI."""

    def resume_postcopy(self, ctxt, instance, migration, timeout=None):
        """Ask the source to resume ``migration`` (one more recovery run
        in its migration executor); answered once the run is handed
        over, not when it ends.

        :returns: True if a run started, False if one already runs.
        :raises MigrationNotResumable: the source refused (its guest is
            not paused in a broken post-copy), or it or the cap is older
            than API 1.7; nothing changed.
        """
        return self._resume_call(ctxt, migration.source_host,
                                 'resume_postcopy', instance, migration,
                                 timeout)

    def postcopy_resume_target(self, ctxt, instance, migration,
                               timeout=None):
        """What the source resumes into, from the destination: a dict of
        ``dest_connect_uri``, ``migration_uri`` and ``xml`` (the domain
        XML its paused half runs, migratable).

        :raises MigrationNotResumable: the destination holds no paused
            half of the guest, or it or the cap is older than API 1.7.
        """
        return self._resume_call(ctxt, migration.dest_host,
                                 'postcopy_resume_target', instance,
                                 migration, timeout)

    def _resume_call(self, ctxt, host, method, instance, migration,
                     timeout):
        if not self.client.can_send_version(RESUME_VERSION):
            raise exception.MigrationNotResumable(
                migration_uuid=migration.uuid, status=migration.status,
                reason=f"{method} needs compute API {RESUME_VERSION}, but "
                       f"[upgrade_levels] compute caps this client below "
                       f"it")
        try:
            return self._call(ctxt, host, RESUME_VERSION, method,
                              timeout=timeout, floor=RESUME_VERSION,
                              instance=instance, migration=migration)
        except messaging.UnsupportedVersion as exc:
            raise exception.MigrationNotResumable(
                migration_uuid=migration.uuid, status=migration.status,
                reason=f"the agent on {host} is of a release older than "
                       f"compute API {RESUME_VERSION} and cannot resume a "
                       f"post-copy; upgrade it, then resume") from exc
