"""The migration-threads scenario's choices and checks, on canned hosts,
kernel answers and records."""

from numamig.objects import migration_threads as record
from numamig_ci import checks
from numamig_ci.nested import deployment
from numamig_ci.nested import vm
from numamig_ci.results import ScenarioSkipped
from numamig_ci.scenarios import threads
from tests import base


def nested_hosts():
    """The HostConfigs of the nested deployment's two hosts."""
    layout = vm.Layout()
    cells = {node: frozenset(layout.node_cpus(node))
             for node in range(layout.nodes)}
    hosts = []
    for index in range(2):
        dedicated, shared = deployment.host_sets(index, layout)
        hosts.append(checks.HostConfig(f'h{index + 1}', dedicated,
                                       shared or frozenset(), cells))
    return hosts


H1, H2 = nested_hosts()
# What /proc showed while copying: the source's threads on its node 0
# shared CPUs, the destination's on its one shared CPU.
SOURCE_VIEW = {'live_migration': frozenset({4, 5}),
               'multifdsend_0': frozenset({4, 5}),
               'return path': frozenset({4, 5})}


def side(host='h1', basis=record.GUEST_NODES, cpus=(4, 5), connections=2,
         threads_seen=None):
    return {'host': host, 'basis': basis, 'cpus': list(cpus),
            'connections': connections,
            'threads': threads_seen if threads_seen is not None else
            {name: sorted(c) for name, c in SOURCE_VIEW.items()}}


class ChooseHostsTest(base.TestCase):

    def test_nested_hosts_move_into_the_destinations_node_0(self):
        # h1 keeps shared CPUs on both nodes; h2 only CPU 5 of node 0,
        # whose five dedicated CPUs are fewer than node 1's six.
        self.assertEqual(('h1', 'h2', 0), threads.choose_hosts([H1, H2]))
        self.assertEqual(('h1', 'h2', 0), threads.choose_hosts([H2, H1]))
        self.assertEqual(frozenset({5}), threads.shared_of(H2, 0))
        self.assertEqual(frozenset({10, 11}), threads.shared_of(H1, 1))

    def test_no_node_the_others_can_be_filled_around_is_skipped(self):
        # Equal nodes, a shared CPU on each: a guest filling one node
        # would fit the other as well.
        cells = {0: frozenset({0, 1}), 1: frozenset({2, 3})}
        even = checks.HostConfig('e', frozenset({0, 2}), frozenset({1, 3}),
                                 cells)
        other = checks.HostConfig('o', frozenset({0, 2}), frozenset({1, 3}),
                                  cells)
        self.assertRaises(ScenarioSkipped, threads.choose_hosts,
                          [even, other])
        no_shared = checks.HostConfig('n', frozenset(range(4)), frozenset(),
                                      cells)
        self.assertRaises(ScenarioSkipped, threads.choose_hosts,
                          [no_shared, H2])

    def test_room_for_the_vcpu_and_its_isolated_emulator(self):
        cells = {0: frozenset({0, 1}), 1: frozenset({2, 3, 4})}
        tight = checks.HostConfig('t', frozenset({0, 2, 3, 4}),
                                  frozenset({1}), cells)
        self.assertRaises(ScenarioSkipped, threads.choose_hosts,
                          [H1, tight])


class ThreadViewTest(base.TestCase):

    def test_migration_threads_only_same_names_united(self):
        view = threads.migration_thread_view({
            'qemu-system-x86': ['0'], 'CPU 0/TCG': ['0'],
            'live_migration': ['4-5'], 'return path': ['4-5'],
            'multifdrecv_0': ['5'], 'mig/src/send_0': ['4', '5'],
            'IO mon_iothread': ['0']})
        self.assertEqual({'live_migration': frozenset({4, 5}),
                          'return path': frozenset({4, 5}),
                          'multifdrecv_0': frozenset({5}),
                          'mig/src/send_0': frozenset({4, 5})}, view)

    def test_placed_once_every_thread_is_on_the_set(self):
        self.assertTrue(threads.placed(SOURCE_VIEW, frozenset({4, 5})))
        self.assertFalse(threads.placed({}, frozenset({4, 5})))
        started = dict(SOURCE_VIEW, multifdsend_1=frozenset({0}))
        self.assertFalse(threads.placed(started, frozenset({4, 5})))


class KernelViewTest(base.TestCase):

    def check(self, view, host=H1, expected=frozenset({4, 5}), role='src'):
        return threads.check_kernel_view('g', host, view, expected, role)

    def test_every_thread_on_the_nodes_shared_cpus_passes(self):
        self.assertEqual([], self.check(SOURCE_VIEW))
        self.assertEqual([], self.check({'multifdrecv_0': frozenset({5})},
                                        H2, frozenset({5}), 'dst'))

    def test_a_thread_left_on_the_guests_pcpu_is_named(self):
        # Where QEMU starts them for a pinned guest: its own pCPU.
        (failure,) = self.check(dict(SOURCE_VIEW,
                                     multifdsend_1=frozenset({0})))
        self.assertEqual("source QEMU thread 'multifdsend_1' "
                         "Cpus_allowed_list", failure.element)
        self.assertEqual('no dedicated pCPU', failure.expected)
        self.assertIn('dedicated pCPUs 0 of h1', failure.note)

    def test_shared_cpus_of_another_node_are_not_enough(self):
        (failure,) = self.check({'live_migration': frozenset({10, 11})})
        self.assertEqual('10-11', failure.actual)
        self.assertIn("4-5 (shared CPUs of the guest's node)",
                      failure.expected)

    def test_no_migration_thread_at_all_fails(self):
        (failure,) = self.check({}, H2, frozenset({5}), 'dst')
        self.assertEqual('none while the copy ran', failure.actual)
        self.assertIn('destination QEMU', failure.element)


class RecordTest(base.TestCase):

    def check(self, recorded, view=SOURCE_VIEW, which='source'):
        return threads.check_record('g', 'h1', recorded,
                                    frozenset({4, 5}), view, which)

    def test_record_as_the_kernel_showed_passes(self):
        self.assertEqual([], self.check(side()))
        dest = side(connections=None,
                    threads_seen={'multifdrecv_0': [4, 5]})
        self.assertEqual([], self.check(
            dest, {'multifdrecv_0': frozenset({4, 5})}, 'dest'))

    def test_absent_side_fails(self):
        (failure,) = self.check(None)
        self.assertEqual('record migration_threads.source', failure.element)
        self.assertEqual('absent', failure.actual)

    def test_what_was_chosen_is_checked(self):
        failures = self.check(side(host='h9', basis=record.SHARED,
                                   cpus=(5,), connections=1))
        self.assertEqual(
            ['record migration_threads.source.host',
             'record migration_threads.source.basis',
             'record migration_threads.source.cpus',
             'record migration_threads.source.connections'],
            [f.element for f in failures])

    def test_a_record_disagreeing_with_the_kernel_fails(self):
        seen = {name: sorted(c) for name, c in SOURCE_VIEW.items()}
        del seen['return path']
        seen['live_migration'] = [0]
        failures = self.check(side(threads_seen=seen))
        self.assertEqual(
            {("record migration_threads.source.threads['live_migration']",
              '4-5 (as /proc showed it)', '0'),
             ("record migration_threads.source.threads['return path']",
              '4-5 (as /proc showed it)', 'absent'),
             ("record migration_threads.source.threads['live_migration']",
              '4-5', '0')},
            {(f.element, f.expected, f.actual) for f in failures})


class MainThreadTest(base.TestCase):
    """Where the migration threads start: off the CPUs they belong on, or
    their placement would show nothing numamig did."""

    def test_main_threads_united(self):
        self.assertEqual(frozenset({1}), threads.main_thread_cpus(
            {'qemu-system-x86': ['1', '1'], 'CPU 0/TCG': ['0']}))
        self.assertIsNone(threads.main_thread_cpus({'CPU 0/TCG': ['0']}))

    def test_isolated_emulator_pcpu_shows_numamigs_placement(self):
        self.assertEqual([], threads.check_main_thread(
            'g', H1, frozenset({1}), frozenset({4, 5})))

    def test_emulator_on_the_shared_cpus_proves_nothing(self):
        # numamig's default: the emulator on the host's shared set, here
        # all on the guest's node: the threads start where they belong.
        (failure,) = threads.check_main_thread('g', H2, frozenset({5}),
                                               frozenset({5}))
        self.assertEqual('5', failure.actual)
        self.assertIn("'qemu-system-x86'", failure.element)
        (missing,) = threads.check_main_thread('g', H2, None,
                                               frozenset({5}))
        self.assertEqual('none', missing.actual)
        self.assertEqual(1, len(threads.check_main_thread(
            'g', H1, frozenset({1, 4}), frozenset({4, 5}))))
