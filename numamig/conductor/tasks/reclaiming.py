"""The live-migration task's placement reclaim (tasks.placement_reclaim).

A mixin of LiveMigrationTask: reclaiming on a destination that refused
the guest only for memory on one node, and, for a scheduled migration
no candidate took, on the hosts the scheduler refused for that reason
(placement_reclaim.scheduled_options); recording what was taken from
whom, and giving it back when the migration does not go ahead.
"""

from numamig import exception
from numamig.conductor import drain
from numamig.conductor.tasks import placement_reclaim
from numamig.db import migration_satellites


class ReclaimingMixin:
    """Needs the task's worker, ctxt, instance, migration, request,
    pagesize_kb, selection, reclaims, reclaim_options, _hosts_read,
    _busy_destinations and _try_destination."""

    def _reclaims_scheduled(self):
        """Whether a scheduled migration may reclaim memory on a host
        the scheduler refused ([virtio_mem] placement_reclaim)."""
        return (self.request is not None and
                not self.migration.requested_host and
                placement_reclaim.enabled(self.worker))

    def _reclaim_options(self, exclude):
        """The hosts a reclaim may open (placement_reclaim.Options), read
        once per migration; ``exclude``: hosts tried or busy."""
        if self.reclaim_options is None:
            busy = self._hosts_read('busy')
            busy = self._busy_destinations() if busy is None else busy
            maintenance = self._hosts_read('maintenance')
            disabled = drain.disabled_hosts(self.worker) \
                if maintenance is None \
                else drain.disabled_reasons(maintenance)
            self.reclaim_options = placement_reclaim.scheduled_options(
                self.worker, self.request, self.migration.source_host,
                self.instance.uuid, exclude=set(busy) | set(exclude),
                disabled=disabled, pagesize_kb=self.pagesize_kb)
        return self.reclaim_options

    def _no_valid_host(self, reason=None):
        """NoValidHost with the scheduler's reasons (or ``reason``) and
        what placement reclaim considered."""
        if reason is None:
            reason = self.selection.reason()
        if self.reclaim_options is not None:
            reason += "; " + self.reclaim_options.note
        return exception.NoValidHost(reason=reason)

    def _try_with_reclaim(self, host, choice=None):
        """_try_destination; where ``[virtio_mem] placement_reclaim``
        allows, a destination refusing the guest only for memory on one
        node is asked once more after the guests there gave it back
        (tasks.placement_reclaim). With ``choice`` (a host the
        scheduler refused, scheduled_options) the reclaim comes first."""
        entry = [None, []]

        def record(entries):
            entry[1] = entries
            if entry not in self.reclaims:
                self.reclaims.append(entry)
            self._record_reclaims()

        answer, room = placement_reclaim.PlacementReclaimTask(
            self.ctxt, self.worker, host,
            lambda: self._try_destination(host), self.instance.uuid,
            self.migration.uuid, record).execute(
                choice, self.request, pagesize_kb=self.pagesize_kb)
        entry[0] = room
        return answer

    def _record_reclaims(self):
        migration_satellites.set_reclaim(
            self.worker.db, self.migration.uuid,
            [e for _room, entries in self.reclaims for e in entries])

    def _give_back_reclaims(self):
        """Give back what the guests of a kept reclaim gave (the claim
        it made room for was dropped), and record it."""
        kept = [entry for entry in self.reclaims if entry[0] is not None]
        for entry in kept:
            room, entry[0] = entry[0], None
            back = placement_reclaim.give_back(self.worker, self.ctxt, room,
                                               self.migration.uuid)
            entry[1] = placement_reclaim.entries(room, back)
        if kept:
            self._record_reclaims()
