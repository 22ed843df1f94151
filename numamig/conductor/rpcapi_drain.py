"""The conductor client's drain calls (release 2), mixed into ConductorAPI.

Apart from numamig.conductor.rpcapi so that the client stays one
readable module; each call needs release 2's API (1.2)
and is refused clearly (one Invalid line) when ``[upgrade_levels]
conductor`` or the conductor is older.
"""

from oslo_utils import uuidutils

from numamig.conductor.api_versions import RELEASE_2

# Added to a wait's timeout for the call's own round trip.
CALL_MARGIN_S = 10


class DrainCalls:
    """host_drain_start/show/wait/abort; needs ``_since``, ``client`` and
    ``timeout`` of ConductorAPI."""

    def host_drain_start(self, ctxt, host, parallel, to=None,
                         keep_free_nodes=0, drain_uuid=None, timeout=None):
        """Plan the drain of ``host`` and, if it empties the host,
        disable it and start moving its guests.

        :param drain_uuid: the drain's uuid (chosen here when None): a
            call sent again with it answers with the drain it started.
        :returns: the drain (numamig.conductor.tasks.drain.view).
        :raises DrainRefused: the host cannot be emptied; nothing moved.
        :raises DrainInProgress: the host is being drained already.
        """
        return self._since(ctxt, 'host_drain_start', RELEASE_2,
                           "draining a host", timeout=timeout, host=host,
                           drain_uuid=drain_uuid or
                           uuidutils.generate_uuid(), parallel=parallel,
                           to=None if to is None else list(to),
                           keep_free_nodes=keep_free_nodes)

    def host_drain_show(self, ctxt, host=None, drain_uuid=None):
        """A drain and its moves: ``drain_uuid``'s or the host's active
        (else last) one.

        :raises DrainNotFound:
        """
        return self._since(ctxt, 'host_drain_show', RELEASE_2,
                           "showing a drain", host=host,
                           drain_uuid=drain_uuid)

    def host_drain_wait(self, ctxt, drain, timeout):
        """``drain`` once it changed from what ``drain`` shows, or after
        ``timeout`` seconds (sooner when the conductor holds as many
        waits as it allows)."""
        return self._since(ctxt, 'host_drain_wait', RELEASE_2,
                           "following a drain",
                           timeout=timeout + (self.timeout or CALL_MARGIN_S),
                           drain_uuid=drain['uuid'],
                           signature=drain['signature'], wait_s=timeout)

    def host_defragment_plan(self, ctxt, vcpus, memory_mb, extra_specs,
                             hosts=None, max_moves=3):
        """The fewest migrations that make room for a guest of these
        specs on one host (of ``hosts``, or any); nothing moves.

        :raises InvalidNUMARequest: the specs make no valid request.
        """
        return self._since(ctxt, 'host_defragment_plan', RELEASE_2,
                           "planning a defragmentation", vcpus=vcpus,
                           memory_mb=memory_mb,
                           extra_specs=dict(extra_specs),
                           hosts=None if hosts is None else list(hosts),
                           max_moves=max_moves)

    def host_defragment_start(self, ctxt, vcpus, memory_mb, extra_specs,
                              parallel, hosts=None, max_moves=3,
                              drain_uuid=None):
        """Plan room for a guest of these specs on one host (of
        ``hosts``, or any) and carry the plan out like a drain: the
        target stays enabled, ``drain show``/``abort`` serve it.

        :param drain_uuid: its uuid (chosen here when None): a call sent
            again with it answers with the defragmentation it started.
        :returns: the defragmentation (numamig.conductor.tasks.drain.view;
            kind ``defragment``).
        :raises DefragmentRefused: no plan within ``max_moves``, or no
            room in the admission queue; nothing moved.
        :raises InvalidNUMARequest, Invalid, HostNotFound: bad input
            (a guest that fits on no host even empty is one).
        """
        return self._since(ctxt, 'host_defragment_start',
                           RELEASE_2,
                           "carrying out a defragmentation", vcpus=vcpus,
                           memory_mb=memory_mb,
                           extra_specs=dict(extra_specs),
                           drain_uuid=drain_uuid or
                           uuidutils.generate_uuid(), parallel=parallel,
                           hosts=None if hosts is None else list(hosts),
                           max_moves=max_moves)

    def host_drain_abort(self, ctxt, host, abort_running=False):
        """Cancel the pending moves of the host's drain (and abort its
        running migrations with ``abort_running``)."""
        return self._since(ctxt, 'host_drain_abort', RELEASE_2,
                           "aborting a drain", host=host,
                           abort_running=abort_running)
