"""Tests of numamig.cpuspec."""

from numamig import cpuspec
from tests import base


class ParseCPUSpecTest(base.TestCase):

    def test_ranges_commas_and_exclusions(self):
        self.assertEqual({0, 1, 2, 5, 7},
                         cpuspec.parse_cpu_spec('0-3,5,7,^3'))

    def test_blank_is_empty(self):
        self.assertEqual(set(), cpuspec.parse_cpu_spec(''))
        self.assertEqual(set(), cpuspec.parse_cpu_spec(None))

    def test_exclusion_range(self):
        self.assertEqual({0, 5}, cpuspec.parse_cpu_spec('0-5,^1-4'))

    def test_errors_name_the_token(self):
        for spec, fragment in [('1-x', "'1-x'"), ('5-2', 'backwards'),
                               ('a', "'a'"), ('1,,2', 'empty term'),
                               ('^3', 'only excludes'),
                               ('70000', 'outside')]:
            self.assertRaisesMessage(cpuspec.CPUSpecError, fragment,
                                     cpuspec.parse_cpu_spec, spec)

    def test_not_a_string(self):
        self.assertRaises(cpuspec.CPUSpecError, cpuspec.parse_cpu_spec, 5)


class FormatCPUSpecTest(base.TestCase):

    def test_ranges(self):
        self.assertEqual('0-3,5,7-8,10-12',
                         cpuspec.format_cpu_spec({0, 1, 2, 3, 5, 7, 8, 10,
                                                  11, 12}))

    def test_no_ranges(self):
        self.assertEqual('0,1,2', cpuspec.format_cpu_spec([2, 1, 0],
                                                          allow_ranges=False))

    def test_round_trip(self):
        cpus = {0, 2, 3, 4, 9, 31, 32, 33}
        self.assertEqual(cpus, cpuspec.parse_cpu_spec(
            cpuspec.format_cpu_spec(cpus)))
