"""The locality watch's pure part: numa_maps parsing, decisions.

``data/locality/qemu-tcg-64m-1node.numa_maps`` was read from a QEMU 7.2
TCG guest (2 vCPUs, 64 MiB) on this project's 1-node build machine;
``two-node-hugepages.numa_maps`` is written in the same format with the
lines a 2-node host shows (a hugetlbfs-backed cell bound to node 1, a
memfd cell with ``preferred:0``, anonymous memory split).
"""

import os

from numamig.numa import locality
from tests import base

DATA = os.path.join(os.path.dirname(__file__), 'data', 'locality')


def _read(name):
    with open(os.path.join(DATA, name)) as f:
        return f.read()


def _independent_sum(text, include):
    """{node: KiB} summed by a second, plain reading of the lines."""
    found = {}
    for line in text.splitlines():
        if not include(line):
            continue
        words = line.split()
        size = int(next(w for w in words if w.startswith(
            'kernelpagesize_kB=')).split('=')[1])
        for word in words:
            if word[0] == 'N' and '=' in word:
                node, pages = word[1:].split('=')
                found[int(node)] = found.get(int(node), 0) + \
                    int(pages) * size
    return found


class TestNumaMaps(base.TestCase):

    def test_real_qemu_sample_counts_anonymous_memory_only(self):
        text = _read('qemu-tcg-64m-1node.numa_maps')
        expected = _independent_sum(
            text, lambda line: 'anon=' in line and 'file=' not in line)
        self.assertEqual(expected, locality.memory_by_node(text))
        # The binary's and libraries' page cache is not the guest's.
        everything = _independent_sum(text, lambda line: 'N0=' in line)
        self.assertGreater(everything[0], expected[0])

    def test_two_nodes_huge_memfd_and_anonymous(self):
        found = locality.memory_by_node(_read('two-node-hugepages.numa_maps'))
        # heap 1000+437 pages, hugetlbfs 64 x 2 MiB on node 1, memfd
        # 256+256, stack 33 on node 1; the binary's 1031 pages not.
        self.assertEqual({0: (1000 + 256) * 4,
                          1: (437 + 256 + 33) * 4 + 64 * 2048}, found)

    def test_empty_and_untouched(self):
        self.assertEqual({}, locality.memory_by_node(''))
        self.assertEqual({}, locality.memory_by_node(
            '7ffd1c3fd000 default anon=0\n'))

    def test_malformed_refused(self):
        for text in ('7f00 default anon=3 N0=3\n',          # no page size
                     '7f00 default anon=3 N0=x kernelpagesize_kB=4\n',
                     '7f00 default anon=3 N0=3 kernelpagesize_kB=x\n'):
            self.assertRaises(locality.Unreadable,
                              locality.memory_by_node, text)

    def test_too_long_refused(self):
        self.assertRaises(locality.Unreadable, locality.memory_by_node,
                          'x' * (locality.MAX_NUMA_MAPS + 1))


def _sample(uuid='g1', memory=None, vcpus=None, excluded=None):
    return locality.GuestSample(
        uuid, {0: 100, 1: 900} if memory is None else memory,
        {0: 2} if vcpus is None else vcpus, excluded)


class TestSample(base.TestCase):

    def test_home_and_remote_share(self):
        sample = _sample(memory={0: 300, 1: 700}, vcpus={0: 1, 1: 3})
        self.assertEqual(1, sample.home)
        self.assertEqual(300, sample.remote_kb)
        self.assertAlmostEqual(0.3, sample.remote_share)

    def test_home_tie_goes_to_memory_then_lowest(self):
        self.assertEqual(1, _sample(memory={0: 1, 1: 5},
                                    vcpus={0: 1, 1: 1}).home)
        self.assertEqual(0, _sample(memory={0: 5, 1: 5},
                                    vcpus={0: 1, 1: 1}).home)

    def test_no_vcpus_all_remote_and_no_memory_no_share(self):
        self.assertIsNone(_sample(vcpus={}).home)
        self.assertEqual(1000, _sample(vcpus={}).remote_kb)
        self.assertEqual(0.0, _sample(memory={}).remote_share)

    def test_host_share(self):
        self.assertIsNone(locality.host_remote_share([]))
        share = locality.host_remote_share([
            _sample('a', {0: 100, 1: 900}, {0: 1}),
            _sample('b', {0: 1000}, {0: 1}, excluded=locality.PINNED)])
        self.assertAlmostEqual(900 / 2000, share)


def _policy(**kw):
    values = {'mode': 'act', 'threshold': 0.5, 'intervals': 3,
                  'pages_per_interval': 1000, 'moves_per_guest': 2,
                  'flap_window': 10, 'page_kb': 4}
    values.update(kw)
    return locality.Policy(**values)


def _run(policy, looks, history=None, first=1):
    """Decide over ``looks`` (a list of sample lists); the states."""
    history = history or {}
    states = []
    for number, samples in enumerate(looks, start=first):
        decisions, history = locality.decide(policy, number, samples,
                                             history)
        states.append([d.state for d in decisions])
    return states, history


class TestDecide(base.TestCase):

    def test_hysteresis_moves_on_the_nth_look_only(self):
        states, _ = _run(_policy(), [[_sample()]] * 3)
        self.assertEqual([[locality.ABOVE], [locality.ABOVE],
                          [locality.MOVE]], states)

    def test_a_dip_below_restarts_the_count(self):
        local = _sample(memory={0: 900, 1: 100})
        states, _ = _run(_policy(), [[_sample()], [_sample()], [local],
                                     [_sample()], [_sample()], [_sample()]])
        self.assertEqual([locality.ABOVE, locality.ABOVE, locality.LOCAL,
                          locality.ABOVE, locality.ABOVE, locality.MOVE],
                         [s[0] for s in states])

    def test_move_targets_the_vcpus_node_and_counts_remote_pages(self):
        decisions, history = locality.decide(
            _policy(intervals=1, pages_per_interval=2000), 5,
            [_sample(memory={0: 40, 1: 4002}, vcpus={0: 2, 1: 1})], {})
        self.assertEqual(locality.MOVE, decisions[0].state)
        self.assertEqual(0, decisions[0].target)
        self.assertEqual(1001, decisions[0].pages)  # 4002 KiB, rounded up
        self.assertEqual((5,), history['g1'].moves)
        self.assertEqual(0, history['g1'].above)

    def test_report_policy_moves_nothing_and_remembers_no_move(self):
        decisions, history = locality.decide(
            _policy(mode='report', intervals=1), 1, [_sample()], {})
        self.assertEqual(locality.REPORTED, decisions[0].state)
        self.assertIn('not moved', decisions[0].reason)
        self.assertEqual((), history['g1'].moves)

    def test_excluded_guests_are_never_candidates(self):
        for why in (locality.PINNED, locality.BOUND):
            states, history = _run(
                _policy(intervals=1, threshold=0.0),
                [[_sample(memory={1: 10 ** 6}, excluded=why)]] * 5)
            self.assertEqual([[why]] * 5, states)
            self.assertEqual((), history['g1'].moves)

    def test_budget_serves_the_largest_share_first(self):
        # 800 pages each; 1000 per interval: one moves now, one waits.
        half = _sample('half', {0: 1600, 1: 3200}, {0: 1})
        full = _sample('full', {1: 3200}, {0: 1})
        decisions, _ = locality.decide(_policy(intervals=1), 1,
                                       [half, full], {})
        self.assertEqual([locality.WAITING_BUDGET, locality.MOVE],
                         [d.state for d in decisions])

    def test_budget_is_never_exceeded(self):
        samples = [_sample(f'g{i}', {0: 4 * i * 37, 1: 4 * (100 + i * 53)},
                           {0: 1}) for i in range(30)]
        for budget in (1, 100, 500, 2000, 10 ** 6):
            decisions, _ = locality.decide(
                _policy(intervals=1, pages_per_interval=budget,
                        threshold=0.0), 1, samples, {})
            moved = sum(d.pages for d in decisions
                        if d.state == locality.MOVE)
            self.assertLessEqual(moved, budget)
            # Nothing that fits what was left waits.
            left = budget - moved
            self.assertFalse([d for d in decisions
                              if d.state == locality.WAITING_BUDGET
                              and d.pages <= left])

    def test_a_guest_larger_than_the_budget_is_named(self):
        decisions, _ = locality.decide(
            _policy(intervals=1, pages_per_interval=10), 1, [_sample()], {})
        self.assertEqual(locality.OVER_BUDGET, decisions[0].state)
        self.assertIn('pages_per_interval', decisions[0].reason)

    def test_flapping_guest_left_alone_after_its_budget(self):
        # Its memory keeps landing on node 1: moved twice, then left.
        states, history = _run(_policy(intervals=1, moves_per_guest=2,
                                       flap_window=10), [[_sample()]] * 6)
        self.assertEqual([locality.MOVE, locality.MOVE] +
                         [locality.FLAPPING] * 4, [s[0] for s in states])
        self.assertEqual((1, 2), history['g1'].moves)

    def test_flapping_ends_when_the_window_has_passed(self):
        states, _ = _run(_policy(intervals=1, moves_per_guest=1,
                                 flap_window=3), [[_sample()]] * 5)
        self.assertEqual([locality.MOVE, locality.FLAPPING,
                          locality.FLAPPING, locality.MOVE,
                          locality.FLAPPING], [s[0] for s in states])

    def test_gone_guests_forgotten_and_unmeasured_named(self):
        _, history = _run(_policy(), [[_sample('a')], [_sample('b')]])
        self.assertEqual({'b'}, set(history))
        decisions, _ = locality.decide(_policy(), 1,
                                       [_sample(vcpus={})], {})
        self.assertEqual(locality.NO_SAMPLE, decisions[0].state)

    def test_policy_checked(self):
        for bad in ({'mode': 'on'}, {'threshold': 1.0},
                    {'threshold': -0.1}, {'intervals': 0},
                    {'pages_per_interval': 0}, {'moves_per_guest': 0}):
            self.assertRaises(ValueError, _policy, **bad)
