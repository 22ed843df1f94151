"""Tests of the integer-keyed dict field types (pin maps)."""

from oslo_serialization import jsonutils
import testscenarios

from numamig.objects import fields
from tests import base

load_tests = testscenarios.load_tests_apply_scenarios


class IntToIntTest(base.TestCase):

    def setUp(self):
        super().setUp()
        self.field = fields.IntToIntField()

    def test_keys_and_values_become_ints(self):
        self.assertEqual({0: 3, 1: 4},
                         self.field.coerce(None, 'pins', {'0': '3', 1: 4}))

    def test_wire_form_has_string_keys_and_survives_json(self):
        primitive = self.field.to_primitive(None, 'pins', {0: 3, 10: 4})
        self.assertEqual({'0': 3, '10': 4}, primitive)
        back = self.field.from_primitive(
            None, 'pins', jsonutils.loads(jsonutils.dumps(primitive)))
        self.assertEqual({0: 3, 10: 4}, back)

    def test_string_and_int_keys_compare_equal_after_coercion(self):
        self.assertEqual(self.field.coerce(None, 'p', {'0': 3}),
                         self.field.coerce(None, 'p', {0: 3}))

    def test_stringify_is_sorted(self):
        self.assertEqual('{0: 1, 2: 3}',
                         self.field.stringify({2: 3, 0: 1}))

    def test_schema(self):
        self.assertEqual(
            {'type': ['object'],
             'additionalProperties': {'type': 'integer'}},
            self.field._type.get_schema())


class IntToIntRejectTest(base.TestCase):

    scenarios = [
        ('not_a_dict', {'value': [1, 2], 'fragment': 'must be a dict'}),
        ('text_key', {'value': {'a': 1},
                      'fragment': "key 'a' is not an integer"}),
        ('negative_key', {'value': {-1: 1},
                          'fragment': 'key -1 is negative'}),
        ('bool_key', {'value': {True: 1},
                      'fragment': 'key True is not an integer'}),
        ('none_key', {'value': {None: 1},
                      'fragment': 'key None is not an integer'}),
        ('text_value', {'value': {0: 'x'},
                        'fragment': "value 'x' is not an integer"}),
        ('float_value', {'value': {0: 1.5},
                         'fragment': 'value 1.5 is not an integer'}),
        ('bool_value', {'value': {0: False},
                        'fragment': 'value False is not an integer'}),
    ]

    def test_rejected(self):
        exc = self.assertRaises(ValueError, fields.IntToIntField().coerce,
                                None, 'pins', self.value)
        self.assertIn('pins ' + self.fragment, str(exc))


class IntToIntSetTest(base.TestCase):

    def setUp(self):
        super().setUp()
        self.field = fields.IntToIntSetField()

    def test_values_become_sets_of_ints(self):
        self.assertEqual({0: {1, 2}, 3: set()},
                         self.field.coerce(None, 'p', {'0': ['1', 2],
                                                       3: ()}))

    def test_wire_form_is_sorted_lists_and_survives_json(self):
        primitive = self.field.to_primitive(None, 'p', {5: {9, 1, 4}})
        self.assertEqual({'5': [1, 4, 9]}, primitive)
        back = self.field.from_primitive(
            None, 'p', jsonutils.loads(jsonutils.dumps(primitive)))
        self.assertEqual({5: {1, 4, 9}}, back)

    def test_string_value_is_not_a_set(self):
        # '12' is iterable; accepting it would pin to CPUs 1 and 2.
        exc = self.assertRaises(ValueError, self.field.coerce, None, 'p',
                                {0: '12'})
        self.assertIn("p value '12' is not a set of ints", str(exc))

    def test_scalar_value_is_not_a_set(self):
        self.assertRaises(ValueError, self.field.coerce, None, 'p', {0: 3})

    def test_element_must_be_an_int(self):
        exc = self.assertRaises(ValueError, self.field.coerce, None, 'p',
                                {0: ['z']})
        self.assertIn("p value 'z' is not an integer", str(exc))

    def test_coercion_copies_the_input(self):
        given = {0: {1}}
        result = self.field.coerce(None, 'p', given)
        result[0].add(2)
        self.assertEqual({0: {1}}, given)

    def test_schema(self):
        self.assertEqual('array', self.field._type.get_schema()[
            'additionalProperties']['type'])
