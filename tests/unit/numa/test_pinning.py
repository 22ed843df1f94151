"""Golden pinning cases per thread policy, written by hand from the rules.

The recurring cell: 2 cores x 2 threads, siblings {0,2} and {1,3}::

    core A: 0 2      core B: 1 3

with pCPU 1 pinned (core B has one free thread, 3), unless said otherwise.
"""

import testscenarios

from numamig import objects
from numamig.numa import cellfit
from numamig.numa import pinning
from tests import base

load_tests = testscenarios.load_tests_apply_scenarios


def _cell(pinned=(1,), siblings=({0, 2}, {1, 3}), cpus=(0, 1, 2, 3),
          shared=()):
    return objects.HostNUMACell(
        id=0, pcpuset=set(cpus) - set(shared), cpuset=set(shared),
        pinned_cpus=set(pinned), siblings=[set(s) for s in siblings],
        memory_mb=1024)


class GoldenPinningTest(testscenarios.WithScenarios, base.TestCase):
    # (policy, slots, cell kwargs) -> expected pCPUs in slot order, or None
    scenarios = [
        ('prefer_2_takes_the_full_free_core',
         {'policy': 'prefer', 'slots': 2, 'cell': {}, 'expected': [0, 2]}),
        ('prefer_1_takes_the_lone_thread_keeping_a_core_whole',
         {'policy': 'prefer', 'slots': 1, 'cell': {}, 'expected': [3]}),
        ('prefer_3_fills_free_core_then_lone_thread',
         {'policy': 'prefer', 'slots': 3, 'cell': {}, 'expected': [0, 2, 3]}),
        ('no_policy_behaves_as_prefer',
         {'policy': None, 'slots': 2, 'cell': {}, 'expected': [0, 2]}),
        ('prefer_4_does_not_fit_3_free',
         {'policy': 'prefer', 'slots': 4, 'cell': {}, 'expected': None}),
        ('require_2_on_the_whole_core',
         {'policy': 'require', 'slots': 2, 'cell': {}, 'expected': [0, 2]}),
        ('require_3_fails_one_whole_core',
         {'policy': 'require', 'slots': 3, 'cell': {}, 'expected': None}),
        ('require_without_smt_fails',
         {'policy': 'require', 'slots': 1, 'cell': {'siblings': ()},
              'expected': None}),
        ('isolate_1_takes_first_thread_of_whole_core',
         {'policy': 'isolate', 'slots': 1, 'cell': {}, 'expected': [0]}),
        ('isolate_2_fails_one_whole_core',
         {'policy': 'isolate', 'slots': 2, 'cell': {}, 'expected': None}),
        ('isolate_without_smt_is_one_pcpu_each',
         {'policy': 'isolate', 'slots': 3, 'cell': {'siblings': ()},
              'expected': [0, 2, 3]}),
        ('isolate_skips_core_with_a_shared_thread',
         {'policy': 'isolate', 'slots': 1,
              'cell': {'pinned': (), 'shared': (2,)}, 'expected': [1]}),
        ('prefer_ignores_shared_threads',
         {'policy': 'prefer', 'slots': 2,
              'cell': {'pinned': (), 'shared': (2,)}, 'expected': [1, 3]}),
    ]

    def test_pinning(self):
        cores = pinning.CellCores(_cell(**self.cell))
        why = cores.check(self.policy, self.slots)
        if self.expected is None:
            self.assertIsNotNone(why)
        else:
            self.assertIsNone(why)
            self.assertEqual(self.expected,
                             cores.choose(self.policy, self.slots))


class ReasonTest(base.TestCase):

    def test_reasons_name_counts(self):
        cores = pinning.CellCores(_cell())
        self.assertEqual("needs 2 whole free cores for isolate, has 1",
                         cellfit.explain(cores.check('isolate', 2)))
        self.assertEqual("needs 4 free dedicated pCPUs, has 3",
                         cellfit.explain(cores.check('prefer', 4)))
        self.assertIn("has no SMT", cellfit.explain(
            pinning.CellCores(_cell(siblings=())).check('require', 1)))

    def test_isolate_siblings(self):
        self.assertEqual({0, 2, 3},
                         pinning.isolate_siblings(_cell(), {0, 3}) - {1})
        self.assertEqual({1, 3}, pinning.isolate_siblings(_cell(), {3}))
