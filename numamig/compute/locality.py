"""A compute agent's locality watch: one look per interval, bounded.

Each look asks the driver for every running guest's memory per node and
where its vCPUs ran (numamig.virt.libvirt.locality), marks the guests
numamig's records pin (dedicated vCPUs) as pinned whatever their XML
says, lets numamig.numa.locality decide, and, under policy ``act``,
moves the memory of the guests it chose, one at a time, stopping between
two when the agent stops. What it saw is kept as a HostLocality for the
host's next report (``host show``, ``instance show``) and the agent's
metrics; what it moved, failed to move or gave up on is logged and told
to the agent's event listeners (a ``locality.*`` notification).

A look never waits for anything but libvirt and /proc: it sends nothing
to the conductor (the periodic report carries its result), so a broker
or conductor outage does not slow it, and it holds no lock a migration
or an RPC endpoint needs.
"""

import dataclasses
import threading

from oslo_log import log as logging
from oslo_utils import timeutils

from numamig import exception
from numamig import objects
from numamig.compute import events
from numamig.numa import locality

LOG = logging.getLogger(__name__)

# The watch's settings (built by the manager from ComputeSettings).
Policy = locality.Policy

# What a move that libvirt refused is shown as (beside numa/locality's).
MOVE_FAILED = 'move-failed'


@dataclasses.dataclass(frozen=True)
class Move:
    """One thing the watch did to a guest, for the notifier.

    :ivar outcome: moved, failed or flapping (left alone from now on).
    """

    host: str
    instance_uuid: str
    outcome: str
    target_node: int | None
    pages: int
    remote_share: float
    reason: str


class LocalityWatch:
    """The watch of one host.

    :param host: the host's name.
    :param driver: its virt driver (locality_samples, move_guest_memory).
    :param policy: numamig.numa.locality.Policy.
    :param proc: the proc root QEMUs are found in.
    :param pinned_by_records: called with no argument, answers the uuids
        numamig's records pin here (never moved whatever the XML says).
    :param events: numamig.compute.events.Events, or None.
    """

    def __init__(self, host, driver, policy, proc, pinned_by_records,
                 events=None):
        self.host = host
        self.driver = driver
        self.policy = policy
        self.proc = proc
        self._pinned = pinned_by_records
        self._events = events
        self._stopping = threading.Event()
        self._look = 0
        self._history = {}
        self._flapping = set()
        self.moves_total = 0
        self.pages_moved_total = 0
        self.failures_total = 0
        self.last = objects.HostLocality(policy=policy.mode)

    def stop(self):
        """Let a look in progress end after the guest it is moving."""
        self._stopping.set()

    def look(self):
        """One look (the periodic job); returns the HostLocality."""
        if self.policy.mode == 'off':
            self.last = objects.HostLocality(policy='off')
            return self.last
        self._look += 1
        pinned = set(self._pinned())
        samples = [dataclasses.replace(s, excluded=locality.PINNED)
                   if s.uuid in pinned and s.excluded is None else s
                   for s in self.driver.locality_samples(self.proc)]
        decisions, self._history = locality.decide(
            self.policy, self._look, samples, self._history)
        shown = []
        for sample, decision in zip(samples, decisions, strict=True):
            if decision.state == locality.MOVE:
                if self._stopping.is_set():
                    decision = dataclasses.replace(
                        decision, state=locality.WAITING_BUDGET,
                        reason="the agent is stopping")
                else:
                    decision = self._move(sample, decision)
            self._note_flapping(sample, decision)
            shown.append(self._guest(sample, decision))
        self.last = objects.HostLocality(
            policy=self.policy.mode, measured_at=timeutils.utcnow(
                with_timezone=True),
            remote_share=locality.host_remote_share(samples),
            guests=shown, moves_total=self.moves_total,
            pages_moved_total=self.pages_moved_total)
        return self.last

    def _move(self, sample, decision):
        try:
            self.driver.move_guest_memory(sample.uuid, decision.target,
                                          self.proc)
        except (exception.HypervisorError, exception.NotFound) as exc:
            self.failures_total += 1
            reason = f"libvirt refused the move to node " \
                     f"{decision.target}: {exc}"
            LOG.warning("%s: locality watch: guest %s not moved: %s",
                        self.host, sample.uuid, reason)
            self._emit(sample, decision, 'failed', reason)
            return dataclasses.replace(decision, state=MOVE_FAILED,
                                       reason=reason)
        self.moves_total += 1
        self.pages_moved_total += decision.pages
        LOG.info("%s: locality watch moved guest %s: %s (%d pages)",
                 self.host, sample.uuid, decision.reason, decision.pages)
        self._emit(sample, decision, 'moved', decision.reason)
        return decision

    def _note_flapping(self, sample, decision):
        """Tell once when a guest starts being left alone."""
        if decision.state != locality.FLAPPING:
            self._flapping.discard(sample.uuid)
            return
        if sample.uuid in self._flapping:
            return
        self._flapping.add(sample.uuid)
        LOG.warning("%s: locality watch leaves guest %s alone: %s",
                    self.host, sample.uuid, decision.reason)
        self._emit(sample, decision, 'flapping', decision.reason)

    def _emit(self, sample, decision, outcome, reason):
        if self._events is None:
            return
        self._events.emit(events.LOCALITY_MOVE, Move(
            host=self.host, instance_uuid=sample.uuid, outcome=outcome,
            target_node=decision.target, pages=decision.pages,
            remote_share=round(sample.remote_share, 4), reason=reason))

    def _guest(self, sample, decision):
        history = self._history.get(sample.uuid)
        return objects.GuestLocality(
            instance_uuid=sample.uuid,
            memory_mb={node: kb // 1024
                       for node, kb in sorted(sample.memory_kb.items())},
            vcpu_nodes=dict(sorted(sample.vcpu_nodes.items())),
            home_node=sample.home,
            remote_share=round(sample.remote_share, 4),
            state=decision.state, reason=decision.reason,
            moves=len(history.moves) if history else 0)


def pinned_by_records(tracker):
    """The callable LocalityWatch takes: the uuids of the guests the
    tracker's records give dedicated vCPUs."""
    def pinned():
        with tracker.lock:
            instances = list(tracker.instances())
        return [i.uuid for i in instances
                if i.get('numa_topology') is not None and any(
                    c.get('cpu_pinning') for c in i.numa_topology.cells)]
    return pinned
