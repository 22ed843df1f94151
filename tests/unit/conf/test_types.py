"""Tests of the option types shared by several groups."""

import testscenarios

from numamig.conf import types
from tests import base

load_tests = testscenarios.load_tests_apply_scenarios


class CPUSetTest(base.TestCase):

    def test_valid_value_kept_as_written(self):
        self.assertEqual('0-3,^2', types.CPUSet()('0-3,^2'))

    def test_blank_is_allowed(self):
        self.assertEqual('', types.CPUSet()(''))

    def test_invalid_raises_value_error_with_token(self):
        exc = self.assertRaises(ValueError, types.CPUSet(), '1,,2')
        self.assertIn("empty term in CPU specification '1,,2'", str(exc))


class PageSizeTest(base.TestCase):

    scenarios = [
        ('kib_number', {'text': '2048', 'kb': 2048}),
        ('mega', {'text': '2M', 'kb': 2048}),
        ('mega_b', {'text': '2MB', 'kb': 2048}),
        ('giga_ib', {'text': '1GiB', 'kb': 1048576}),
        ('lower_case', {'text': '1g', 'kb': 1048576}),
        ('kilo', {'text': '64K', 'kb': 64}),
        ('spaces', {'text': ' 4 ', 'kb': 4}),
    ]

    def test_parsed(self):
        self.assertEqual(self.kb, types.page_size_kb(self.text))


class BadPageSizeTest(base.TestCase):

    scenarios = [
        ('not_power_of_two', {'text': '3000', 'fragment': 'power of two'}),
        ('too_small', {'text': '2', 'fragment': 'at least 4 KiB'}),
        ('unit_only', {'text': 'M', 'fragment': 'is not a number'}),
        ('words', {'text': 'huge', 'fragment': 'is not a number'}),
        ('terabyte', {'text': '1T', 'fragment': 'is not a number'}),
        ('negative', {'text': '-2M', 'fragment': 'is not a number'}),
    ]

    def test_rejected(self):
        exc = self.assertRaises(ValueError, types.page_size_kb, self.text)
        self.assertIn(self.fragment, str(exc))


class ReservedHugePagesTest(base.TestCase):

    def test_parsed_to_ints(self):
        self.assertEqual({'node': 1, 'size': 1048576, 'count': 2},
                         types.ReservedHugePages()('node:1,size:1G,count:2'))

    def test_missing_and_unknown_keys_named(self):
        exc = self.assertRaises(ValueError, types.ReservedHugePages(),
                                'node:0,pages:4')
        self.assertIn("missing ['count', 'size'], unknown ['pages']",
                      str(exc))

    def test_node_must_be_an_integer(self):
        exc = self.assertRaises(ValueError, types.ReservedHugePages(),
                                'node:zero,size:2M,count:1')
        self.assertIn("node 'zero' is not a non-negative integer", str(exc))
