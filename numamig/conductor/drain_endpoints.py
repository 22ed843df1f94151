"""The conductor's drain endpoints (API 1.10; defragmentations carried
out, 1.13), mixed into its manager.

Kept beside the manager (numamig.conductor.manager) so that its
migration paths stay as they are; each endpoint delegates to the plans
(drain.py, defragment.py) or the tasks (tasks/drain.py,
tasks/defragment.py), and the manager's DrainDriver
(tasks/drain_driver.py) carries drains forward.
"""

import oslo_messaging as messaging

from numamig import exception
from numamig import wire
from numamig.conductor import defragment
from numamig.conductor import drain
from numamig.conductor import watch
from numamig.conductor.tasks import defragment as defragment_task
from numamig.conductor.tasks import drain as drain_task

_EXPECTED = (exception.MigrationError, exception.Invalid,
             exception.NotFound, exception.ConcurrentUpdate)


class DrainEndpoints:
    """host_drain_start, host_drain_show, host_drain_wait,
    host_drain_abort, host_defragment_plan and host_defragment_start;
    the manager sets
    ``worker``, ``drains`` (the DrainDriver) and ``drain_watch``."""

    @wire.args(host=wire.HOST, drain_uuid=wire.UUID,
               parallel=wire.integer(1, drain_task.MAX_PARALLEL),
               to=wire.host_list(drain.MAX_DESTINATIONS).or_none(),
               keep_free_nodes=wire.integer(0, drain.MAX_KEEP_FREE))
    @messaging.expected_exceptions(*_EXPECTED)
    def host_drain_start(self, ctxt, host, drain_uuid, parallel, to=None,
                         keep_free_nodes=0):
        """Plan the drain of ``host``; if it empties it, disable the host
        and start moving its guests (API 1.10).

        Idempotent: a repeat (the same ``drain_uuid``, chosen by the
        client) answers with the drain the first started and starts
        nothing.
        """
        return drain_task.DrainTask(
            ctxt, self.worker, self.drains, host, drain_uuid, parallel,
            to=to, keep_free_nodes=keep_free_nodes).execute()

    @wire.args(host=wire.HOST.or_none(), drain_uuid=wire.UUID.or_none())
    @messaging.expected_exceptions(*_EXPECTED)
    def host_drain_show(self, ctxt, host=None, drain_uuid=None):
        """A drain and its moves: ``drain_uuid``'s, or the host's active
        (else last) one.

        Idempotent: a repeat reads only.
        """
        if (host is None) == (drain_uuid is None):
            raise exception.Invalid(
                reason="name either a host or a drain uuid")
        return drain_task.show(self.worker, host=host, drain_uuid=drain_uuid)

    @wire.args(drain_uuid=wire.UUID, signature=wire.text(64),
               wait_s=wire.number(0, 3600))
    @messaging.expected_exceptions(*_EXPECTED)
    def host_drain_wait(self, ctxt, drain_uuid, signature, wait_s):
        """The drain once its ``signature`` differs from the one given
        (what the caller last saw), or after ``wait_s`` seconds (at most
        watch.MAX_WAIT_S): the same bounded waits as migration_wait.

        Idempotent: a repeat reads only.
        """
        return self.drain_watch.wait(
            lambda: drain_task.show(self.worker, drain_uuid=drain_uuid),
            drain_uuid, lambda data: data['signature'] != signature,
            wait_s)

    @wire.args(vcpus=wire.integer(1, 4096),
               memory_mb=wire.integer(1, 2 ** 31),
               extra_specs=wire.mapping(64),
               hosts=wire.host_list(defragment.MAX_HOSTS).or_none(),
               max_moves=wire.integer(0, defragment.MAX_MOVES))
    @messaging.expected_exceptions(*_EXPECTED)
    def host_defragment_plan(self, ctxt, vcpus, memory_mb, extra_specs,
                             hosts=None, max_moves=3):
        """The fewest migrations that make room for a guest of these
        specs on one host (API 1.10); nothing moves.

        Idempotent: a repeat reads only and gets the same plan.
        """
        return defragment.plan(self.worker, vcpus, memory_mb, extra_specs,
                               hosts=hosts, max_moves=max_moves)

    @wire.args(vcpus=wire.integer(1, 4096),
               memory_mb=wire.integer(1, 2 ** 31),
               extra_specs=wire.mapping(64), drain_uuid=wire.UUID,
               parallel=wire.integer(1, drain_task.MAX_PARALLEL),
               hosts=wire.host_list(defragment.MAX_HOSTS).or_none(),
               max_moves=wire.integer(0, defragment.MAX_MOVES))
    @messaging.expected_exceptions(*_EXPECTED)
    def host_defragment_start(self, ctxt, vcpus, memory_mb, extra_specs,
                              drain_uuid, parallel, hosts=None,
                              max_moves=3):
        """Plan room for a guest of these specs on one host and, if a
        plan is found, carry it out as a drain of kind ``defragment``
        (API 1.13); refused with nothing recorded otherwise.

        Idempotent: a repeat (the same ``drain_uuid``, chosen by the
        client) answers with the defragmentation the first started and
        starts nothing.
        """
        return defragment_task.DefragmentTask(
            ctxt, self.worker, self.drains, drain_uuid, vcpus, memory_mb,
            extra_specs, parallel, hosts=hosts,
            max_moves=max_moves).execute()

    @wire.args(host=wire.HOST, abort_running=wire.BOOL)
    @messaging.expected_exceptions(*_EXPECTED)
    def host_drain_abort(self, ctxt, host, abort_running=False):
        """Cancel the pending moves of the host's drain; with
        ``abort_running`` abort its running migrations too.

        Idempotent: a repeat finds nothing left to cancel and asks the
        sources to abort again, which changes nothing more.
        """
        return drain_task.abort(self.worker, self.drains, host,
                                abort_running=abort_running)


def make_watch(max_waiters):
    """The drain waits' watch (its own bound, like migrations')."""
    return watch.MigrationWatch(max_waiters)
