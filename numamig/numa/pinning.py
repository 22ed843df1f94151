"""Choosing the pCPUs of a host cell for pinned vCPUs, per thread policy.

A host cell's dedicated pCPUs group into cores: each SMT sibling group
(its dedicated threads) is one core, a dedicated pCPU in no group is a
core of one thread. The policies:

- ``prefer`` (and no policy): fill the cores with the most free threads
  first; the last, partial core is the one with the fewest free threads
  that still holds the remaining vCPUs, so whole cores stay free.
- ``isolate``: every vCPU gets a whole free core (all its threads free and
  dedicated) and its sibling threads are marked used on apply.
- ``require``: only whole free cores of two or more threads, filled
  thread by thread, so that vCPUs land on sibling threads.

Isolated emulator threads take one more slot chosen by the same rule,
after the vCPUs'. Everything here is computed from the host cell alone and
never modifies it.
"""

from numamig.objects import fields

_THREADS = fields.CPUThreadAllocationPolicy


class CellCores:
    """The core layout and free threads of one host cell, computed once.

    A views.CellView keeps one, so that every fit against the same
    view shares the work; the layouts are built on first need.
    """

    def __init__(self, host_cell):
        self._cell = host_cell
        self._free = host_cell.free_pcpus
        self.free_count = len(self._free)
        self._cores = None
        self._preferred = None

    def _layout(self):
        # Built on first need, for isolate and require only: the other
        # policies need just the free threads (_preferred_cores), and a
        # fit looks at every host cell. A view, and so this object, may
        # serve fits in several threads at once: _cores, which says the
        # layout is there, is set last.
        if self._cores is not None:
            return
        dedicated, free = self._cell.pcpuset, self._free
        grouped = set()
        cores = []
        for group in self._cell.siblings:
            grouped |= group
            threads = sorted(group & dedicated)
            if threads:
                # A core is whole only if every thread, shared ones too,
                # is a free dedicated pCPU.
                cores.append((threads, group <= free))
        cores.extend(([cpu], cpu in free) for cpu in dedicated - grouped)
        cores.sort()
        self.whole = [threads for threads, whole in cores if whole]
        self.whole_smt = [threads for threads in self.whole
                          if len(threads) > 1]
        self.has_smt = any(len(threads) > 1 for threads, _ in cores)
        self.smt_room = sum(len(threads) for threads in self.whole_smt)
        self._cores = cores

    def _preferred_cores(self):
        """Return the free threads of each core that has some, sorted,
        the cores with the most free threads first (the prefer order)."""
        if self._preferred is None:
            free = self._free
            siblings = self._cell.siblings
            threads = [sorted(group & free) for group in siblings
                       if not group.isdisjoint(free)]
            threads.extend([cpu] for cpu in free.difference(*siblings))
            threads.sort(key=lambda t: (-len(t), t[0]))
            self._preferred = threads
        return self._preferred

    def check(self, policy, count):
        """Return None if ``count`` slots can be pinned, else why not (a
        (template, values) pair: cellfit.explain makes it text)."""
        if self.free_count < count:
            return ("needs %d free dedicated pCPUs, has %d",
                    (count, self.free_count))
        if policy not in (_THREADS.ISOLATE, _THREADS.REQUIRE):
            return None
        self._layout()
        if policy == _THREADS.ISOLATE:
            if len(self.whole) < count:
                return ("needs %d whole free cores for isolate, has %d",
                        (count, len(self.whole)))
            return None
        if policy == _THREADS.REQUIRE:
            if not self.has_smt:
                return ("has no SMT sibling threads, which require needs",
                        ())
            if self.smt_room < count:
                return ("needs %d free sibling threads on whole free cores "
                        "for require, has %d", (count, self.smt_room))
        return None

    def choose(self, policy, count):
        """Return ``count`` pCPUs in slot order; check() must have passed."""
        if policy == _THREADS.ISOLATE:
            self._layout()
            return [threads[0] for threads in self.whole[:count]]
        if policy == _THREADS.REQUIRE:
            self._layout()
            return _fill(self.whole_smt, count)
        return _prefer(self._preferred_cores(), count)


def _fill(cores, count):
    chosen = []
    for threads in cores:
        if len(chosen) >= count:
            break
        chosen.extend(threads)
    return chosen[:count]


def _prefer(ordered, count):
    chosen = []
    for index, threads in enumerate(ordered):
        remaining = count - len(chosen)
        if remaining == 0:
            break
        if len(threads) <= remaining:
            chosen.extend(threads)
            continue
        # Best fit for the remainder keeps larger free cores whole.
        best = min((t for t in ordered[index:] if len(t) >= remaining),
                   key=lambda t: (len(t), t[0]))
        chosen.extend(best[:remaining])
        break
    return chosen


def isolate_siblings(host_cell, pcpus):
    """Return ``pcpus`` plus every thread of the cores they are on."""
    marked = set(pcpus)
    for group in host_cell.siblings:
        if group & marked:
            marked |= group
    return marked
