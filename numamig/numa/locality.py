"""Locality of floating guests: where their memory is, where their vCPUs
run, and when the locality watch moves the memory to the vCPUs.

A guest without a strict binding (shared vCPUs, ``preferred`` or
``interleave`` memory, no NUMA topology at all) is placed by the kernel:
its vCPU threads run wherever the scheduler puts them and its memory
stays where it was first touched. When the two part, every access the
vCPUs make crosses the interconnect. The watch measures each such guest
(the kernel's ``/proc/PID/numa_maps`` of its QEMU, and the CPU each
vCPU thread last ran on, which libvirt's vcpuinfo reads from the
thread's /proc stat), and, when a host's policy says ``act``,
moves the memory of a guest whose remote share stayed high toward the
node its vCPUs run on.

The lesson it follows is the runtime scheduler's (seed 003): move data
toward its user only on a sustained signal, and within a budget, or the
moving does more harm than the remote accesses did. So: a guest must be
above the threshold for ``intervals`` consecutive looks (hysteresis); a
host moves at most ``pages_per_interval`` pages per look (the guests
whose remote pages fit, largest remote share first); and a guest moved
``moves_per_guest`` times within ``flap_window`` looks is left alone
until that window has passed (its vCPUs keep moving, so chasing them
would cost more than it gains). Pinned and strictly bound guests are
never candidates: someone placed them on purpose.

Pure: parses text given to it and decides from values; the agent
(numamig.compute.locality) reads the files and calls libvirt.
"""

import dataclasses
import re

# numa_maps lines are about 150 characters; a QEMU has a few hundred
# mappings (351 measured for a 64 MiB TCG guest), a large guest with
# many devices a few thousand. Far above that is not a numa_maps.
MAX_NUMA_MAPS = 8 * 1024 * 1024

POLICIES = ('off', 'report', 'act')

# Why a guest is not a candidate, or what the watch did with it.
PINNED = 'pinned'
BOUND = 'strictly-bound'
NO_SAMPLE = 'not-measured'
LOCAL = 'local'
ABOVE = 'above-threshold'
OVER_BUDGET = 'over-budget'
WAITING_BUDGET = 'waiting-for-budget'
FLAPPING = 'flapping'
MOVE = 'move'
REPORTED = 'would-move'
STATES = (PINNED, BOUND, NO_SAMPLE, LOCAL, ABOVE, OVER_BUDGET,
          WAITING_BUDGET, FLAPPING, MOVE, REPORTED)

_NODE = re.compile(r'^N(\d+)=(\d+)$')
_PAGE = re.compile(r'^kernelpagesize_kB=(\d+)$')


class Unreadable(ValueError):
    """Raised for text that is not what the kernel writes."""


def memory_by_node(numa_maps):
    """{host node: KiB} of the guest memory a QEMU's numa_maps shows.

    Counted: private anonymous memory (``anon=``, where a guest's RAM is
    by default), huge-page mappings (``huge``: hugetlbfs-backed guest
    RAM) and memfd-backed memory (``file=/memfd:``, libvirt's
    ``<source type='memfd'/>``). Not counted: mappings of regular files
    (the QEMU binary, its libraries, firmware images), which are the
    page cache's and shared with every other QEMU. Each mapping's
    ``N<node>=<pages>`` counts its pages of ``kernelpagesize_kB``.

    :raises Unreadable: the text is too long, or a counted line lacks
        its page size or has a malformed node count.
    """
    if len(numa_maps) > MAX_NUMA_MAPS:
        raise Unreadable(f"numa_maps of {len(numa_maps)} characters (at "
                         f"most {MAX_NUMA_MAPS})")
    found = {}
    for line in numa_maps.splitlines():
        words = line.split()
        if len(words) < 2 or not _guest_memory(words):
            continue
        page_kb, counts = None, {}
        for word in words[2:]:
            if word.startswith('N') and '=' in word:
                match = _NODE.match(word)
                if not match:
                    raise Unreadable(f"bad node count {word!r}")
                node, pages = int(match.group(1)), int(match.group(2))
                counts[node] = counts.get(node, 0) + pages
            elif word.startswith('kernelpagesize_kB='):
                match = _PAGE.match(word)
                if not match:
                    raise Unreadable(f"bad page size {word!r}")
                page_kb = int(match.group(1))
        if counts and page_kb is None:
            raise Unreadable(f"no kernelpagesize_kB in {line[:80]!r}")
        for node, pages in counts.items():
            found[node] = found.get(node, 0) + pages * page_kb
    return found


def _guest_memory(words):
    if 'huge' in words:
        return True
    rest = words[2:]
    if any(w.startswith('file=') for w in rest):
        return any(w.startswith('file=/memfd:') for w in rest)
    return any(w.startswith('anon=') for w in rest)


@dataclasses.dataclass(frozen=True)
class GuestSample:
    """One look at one guest.

    :param uuid: the guest.
    :param memory_kb: {host node: KiB} of its memory (memory_by_node).
    :param vcpu_nodes: {host node: vCPUs whose thread last ran there}.
    :param excluded: None, or PINNED / BOUND: why the watch must not
        touch it (the agent decides from its domain XML and records).
    """

    uuid: str
    memory_kb: dict
    vcpu_nodes: dict
    excluded: str | None = None

    @property
    def home(self):
        """The node most of its vCPUs ran on (ties: the one holding more
        of its memory, then the lowest id); None without vCPU data."""
        if not self.vcpu_nodes:
            return None
        return min(self.vcpu_nodes, key=lambda n: (
            -self.vcpu_nodes[n], -self.memory_kb.get(n, 0), n))

    @property
    def total_kb(self):
        return sum(self.memory_kb.values())

    @property
    def remote_kb(self):
        """Memory not on the home node (all of it without a home)."""
        home = self.home
        return self.total_kb - (self.memory_kb.get(home, 0)
                                if home is not None else 0)

    @property
    def remote_share(self):
        """remote_kb / total_kb, 0.0 for a guest with no memory seen."""
        total = self.total_kb
        return self.remote_kb / total if total else 0.0


def host_remote_share(samples):
    """The share of the measured guests' memory that is remote from its
    guest's vCPUs, over all of them (excluded guests included: their
    remote memory costs the same); None when nothing was measured."""
    total = sum(s.total_kb for s in samples)
    if not total:
        return None
    return sum(s.remote_kb for s in samples) / total


@dataclasses.dataclass(frozen=True)
class Policy:
    """A host's watch settings ([locality] options).

    :param mode: off (nothing measured), report (measure and say what it
        would move), act (move).
    :param threshold: remote share (0-1) above which a guest counts.
    :param intervals: consecutive looks above it before a move.
    :param pages_per_interval: most pages (of ``page_kb``) moved per look
        on this host, all guests together.
    :param moves_per_guest: most moves of one guest within
        ``flap_window`` looks; past it the guest is left alone.
    :param flap_window: looks over which moves are counted.
    :param page_kb: the page the budget counts (4 KiB, the base page).
    """

    mode: str
    threshold: float
    intervals: int
    pages_per_interval: int
    moves_per_guest: int
    flap_window: int
    page_kb: int = 4

    def __post_init__(self):
        if self.mode not in POLICIES:
            raise ValueError(f"policy {self.mode!r} is not one of "
                             f"{', '.join(POLICIES)}")
        if not 0.0 <= self.threshold < 1.0:
            raise ValueError(f"threshold {self.threshold} is not in [0, 1)")
        for name in ('intervals', 'pages_per_interval', 'moves_per_guest',
                     'flap_window', 'page_kb'):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1")


@dataclasses.dataclass(frozen=True)
class GuestHistory:
    """What the watch remembers of a guest between looks.

    :param above: consecutive looks above the threshold until now.
    :param moves: the look numbers at which it was moved (recent only).
    """

    above: int = 0
    moves: tuple = ()


@dataclasses.dataclass(frozen=True)
class Decision:
    """What one look decided for one guest.

    :param state: one of STATES.
    :param target: the node its memory goes to (MOVE, REPORTED).
    :param pages: the pages that move (its remote memory).
    :param reason: one line for the operator.
    """

    uuid: str
    state: str
    target: int | None = None
    pages: int = 0
    reason: str = ''


def decide(policy, look, samples, history):
    """One look's decisions, and the history for the next look.

    :param look: this look's number (increasing by one per look).
    :param samples: GuestSamples of the guests running now.
    :param history: {uuid: GuestHistory} from the previous look; guests
        no longer sampled are forgotten.
    :returns: ([Decision] in sample order, {uuid: GuestHistory}).
    """
    decisions, after, candidates = {}, {}, []
    for sample in samples:
        past = history.get(sample.uuid, GuestHistory())
        recent = tuple(m for m in past.moves
                       if look - m < policy.flap_window)
        state = _standing(policy, sample, past, recent)
        above = (past.above + 1 if state in (ABOVE, None) else 0)
        after[sample.uuid] = GuestHistory(above=above, moves=recent)
        if state is None and above < policy.intervals:
            state = ABOVE
        if state is not None:
            decisions[sample.uuid] = Decision(
                sample.uuid, state, reason=_reason(policy, state, sample,
                                                   above))
        else:
            candidates.append(sample)
    budget = policy.pages_per_interval
    # Largest remote share first: it gains most per page moved.
    for sample in sorted(candidates,
                         key=lambda s: (-s.remote_share, s.uuid)):
        pages = _pages(sample.remote_kb, policy.page_kb)
        if pages > policy.pages_per_interval:
            decisions[sample.uuid] = Decision(
                sample.uuid, OVER_BUDGET, sample.home, pages,
                f"{pages} remote pages exceed the budget of "
                f"{policy.pages_per_interval} per interval; raise "
                f"[locality] pages_per_interval to let it move")
            continue
        if pages > budget:
            decisions[sample.uuid] = Decision(
                sample.uuid, WAITING_BUDGET, sample.home, pages,
                f"{pages} remote pages, {budget} left in this interval's "
                f"budget; next interval")
            continue
        budget -= pages
        acting = policy.mode == 'act'
        decisions[sample.uuid] = Decision(
            sample.uuid, MOVE if acting else REPORTED, sample.home, pages,
            f"remote share {sample.remote_share:.0%} above "
            f"{policy.threshold:.0%} for {after[sample.uuid].above} "
            f"intervals: memory to node {sample.home}"
            + ("" if acting else " (policy report: not moved)"))
        if acting:
            past = after[sample.uuid]
            after[sample.uuid] = GuestHistory(above=0,
                                              moves=past.moves + (look,))
    return [decisions[s.uuid] for s in samples], after


def _standing(policy, sample, past, recent):
    """The state that needs no budget, or None for a guest above the
    threshold long enough to be a candidate (ABOVE if not yet)."""
    if sample.excluded is not None:
        return sample.excluded
    if sample.home is None or not sample.total_kb:
        return NO_SAMPLE
    if sample.remote_share <= policy.threshold:
        return LOCAL
    if len(recent) >= policy.moves_per_guest:
        return FLAPPING
    return None


def _reason(policy, state, sample, above):
    if state == PINNED:
        return "vCPUs pinned: placed on purpose, never moved"
    if state == BOUND:
        return "memory strictly bound: placed on purpose, never moved"
    if state == NO_SAMPLE:
        return "no memory or vCPU thread seen"
    if state == LOCAL:
        return (f"remote share {sample.remote_share:.0%} at or below "
                f"{policy.threshold:.0%}")
    if state == FLAPPING:
        return (f"moved {policy.moves_per_guest} times within "
                f"{policy.flap_window} intervals: left alone (its vCPUs "
                f"keep moving)")
    return (f"remote share {sample.remote_share:.0%} above "
            f"{policy.threshold:.0%} for {above} of {policy.intervals} "
            f"intervals")


def _pages(kb, page_kb):
    return -(-kb // page_kb)
