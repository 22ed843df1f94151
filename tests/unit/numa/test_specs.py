"""Tests of numamig.numa.specs: which keys a new guest may carry."""

import testscenarios

from numamig import exception
from numamig.numa import specs
from tests import base

load_tests = testscenarios.load_tests_apply_scenarios


class CheckKnownTest(base.TestCase):

    def assert_refused(self, fragment, extra_specs=None, image=None,
                       foreign=()):
        exc = self.assertRaises(exception.UnknownNUMASpec,
                                specs.check_known, extra_specs or {},
                                image or {}, foreign)
        self.assertIn(fragment, str(exc))
        return exc

    def test_typo_of_a_flavor_key_names_the_closest(self):
        self.assert_refused(
            "Unknown flavor key hw:cpu_polcy (did you mean hw:cpu_policy?)",
            {'hw:cpu_polcy': 'dedicated'})

    def test_typo_of_an_image_property_names_the_closest(self):
        self.assert_refused(
            "image property hw_mem_pagesize (did you mean "
            "hw_mem_page_size?)", image={'hw_mem_pagesize': 'large'})

    def test_no_close_key_gives_no_hint(self):
        exc = self.assert_refused("hw:watchdog_action",
                                  {'hw:watchdog_action': 'reset'})
        self.assertNotIn('did you mean', str(exc))
        self.assertIn('foreign_numa_specs', str(exc))

    def test_every_declared_key_passes(self):
        flavor = {s.flavor_key: 'x' for s in specs.SPECS
                  if not s.per_cell}
        image = {s.image_key: 'x' for s in specs.SPECS
                 if s.image_key and not s.per_cell}
        self.assertIsNone(specs.check_known(flavor, image))

    def test_per_cell_keys_only_where_declared(self):
        self.assertIsNone(specs.check_known(
            {'hw:numa_cpus.0': '0', 'hw:numa_mem.1': '512'},
            {'hw_numa_cpus.0': '0'}))
        self.assert_refused("hw:cpu_policy.0", {'hw:cpu_policy.0': 'x'})
        self.assert_refused("hw:numa_cpus", {'hw:numa_cpus': '0'})

    def test_other_namespaces_and_foreign_keys_pass(self):
        self.assertIsNone(specs.check_known(
            {'quota:cpu_shares': '10', 'trait:CUSTOM_X': 'required',
             'hw:watchdog_action': 'reset'}, {'os_distro': 'debian'},
            foreign=('hw:watchdog_action',)))

    def test_inputs_are_not_changed(self):
        flavor = {'hw:cpu_policy': 'dedicated'}
        specs.check_known(flavor, {})
        self.assertEqual({'hw:cpu_policy': 'dedicated'}, flavor)


class VCPUMaskTest(testscenarios.WithScenarios, base.TestCase):
    """hw:cpu_dedicated_mask / hw:cpu_realtime_mask, from the rule: a mask
    starting with ``^`` is read against all vCPUs, any other names just
    its vCPUs; exclusions win wherever they stand."""

    scenarios = [
        ('issue_example', {'vcpus': 4, 'mask': '^0,2', 'named': {1, 2, 3}}),
        ('only_exclusions', {'vcpus': 4, 'mask': '^0', 'named': {1, 2, 3}}),
        ('exclusion_range', {'vcpus': 8, 'mask': '^0-1', 'named':
                             {2, 3, 4, 5, 6, 7}}),
        ('several_of_each', {'vcpus': 8, 'mask': '^0,^4,2,5,^7',
                             'named': {1, 2, 3, 5, 6}}),
        ('ranges_both_ways', {'vcpus': 8, 'mask': '^2-3,3-5,^5',
                              'named': {0, 1, 4, 6, 7}}),
        ('exclusion_beats_inclusion', {'vcpus': 4, 'mask': '^2,2',
                                       'named': {0, 1, 3}}),
        ('spaces_around_caret', {'vcpus': 4, 'mask': ' ^ 1 , 3',
                                 'named': {0, 2, 3}}),
        ('one_vcpu_guest', {'vcpus': 1, 'mask': '^0', 'named': set()}),
        ('plain_list', {'vcpus': 8, 'mask': '1,4-5', 'named': {1, 4, 5}}),
        ('plain_list_with_exclusion', {'vcpus': 8, 'mask': '0-5,^2,7',
                                       'named': {0, 1, 3, 4, 5, 7}}),
        ('exclusion_after_inclusion', {'vcpus': 4, 'mask': '2,^0',
                                       'named': {2}}),
    ]

    def test_named(self):
        self.assertEqual(self.named, specs.parse_vcpu_mask(
            'hw:cpu_dedicated_mask', self.mask, self.vcpus))


class VCPUListTest(testscenarios.WithScenarios, base.TestCase):
    """hw:numa_cpus.N: the listed vCPUs less exclusions, whatever comes
    first; only exclusions: every vCPU but those."""

    scenarios = [
        ('caret_first_lists_vcpus', {'mask': '^0,2-3', 'named': {2, 3}}),
        ('only_exclusions', {'mask': '^0-1', 'named': {2, 3, 4, 5}}),
        ('plain', {'mask': '0-2,^1', 'named': {0, 2}}),
    ]

    def test_named(self):
        self.assertEqual(self.named, specs.parse_vcpu_list(
            'hw:numa_cpus.0', self.mask, 6))


class BadVCPUMaskTest(testscenarios.WithScenarios, base.TestCase):
    scenarios = [
        ('blank', {'mask': ' ', 'fragment': "names no vCPU"}),
        ('commas_only', {'mask': ',,', 'fragment': "names no vCPU"}),
        ('beyond_the_guest', {'mask': '^0,5', 'fragment':
                              "names vCPUs [5] but the guest has vCPUs "
                              "0-3"}),
        ('backwards_range', {'mask': '^3-1', 'fragment': "runs backwards"}),
        ('not_a_number', {'mask': '^x', 'fragment': "invalid CPU number"}),
    ]

    def test_refused_naming_the_key(self):
        for parse in (specs.parse_vcpu_mask, specs.parse_vcpu_list):
            exc = self.assertRaises(exception.InvalidNUMASpec, parse,
                                    'hw:cpu_realtime_mask', self.mask, 4)
            self.assertIn('hw:cpu_realtime_mask', str(exc))
            self.assertIn(self.fragment, str(exc))


class CheckTest(base.TestCase):
    """specs.check: the one rule of every place taking flavor-like specs
    (issue 44 H2): keys, and the migration policy's value."""

    POLICIES = ('finish', 'never_pause', 'nfv', 'timer')

    def test_an_unknown_policy_is_refused_with_the_known_ones(self):
        exc = self.assertRaises(
            exception.UnknownMigrationPolicy, specs.check,
            {'hw:live_migration_policy': 'gold'}, {}, (), self.POLICIES)
        self.assertIn("Unknown live-migration policy gold (flavor key "
                      "hw:live_migration_policy)", str(exc))
        self.assertIn("known policies: finish, never_pause, nfv, timer",
                      str(exc))

    def test_a_close_policy_name_is_hinted(self):
        exc = self.assertRaises(
            exception.UnknownMigrationPolicy, specs.check, {},
            {'hw_live_migration_policy': 'nvf'}, (), self.POLICIES)
        self.assertIn("image property hw_live_migration_policy; did you "
                      "mean nfv?", str(exc))

    def test_known_policies_and_other_keys_pass(self):
        self.assertIsNone(specs.check(
            {'hw:live_migration_policy': 'nfv', 'hw:cpu_policy': 'x',
             'quota:cpu_shares': '1'},
            {'hw_live_migration_policy': 'timer'}, (), self.POLICIES))

    def test_keys_are_checked_before_values(self):
        self.assertRaises(exception.UnknownNUMASpec, specs.check,
                          {'hw:cpu_polcy': 'dedicated',
                           'hw:live_migration_policy': 'gold'}, {}, (),
                          self.POLICIES)

    def test_without_policies_only_keys_are_checked(self):
        self.assertIsNone(specs.check(
            {'hw:live_migration_policy': 'gold'}, {}))
