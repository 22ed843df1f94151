"""audit.placement.differences: one named row per kind of difference."""

import testscenarios

from numamig.audit import placement
from tests import base
from tests.fixtures import libvirt_guests as g

load_tests = testscenarios.load_tests_apply_scenarios


def _recorded():
    return g.topology(g.cell(0, host_cell=0, vcpus={0, 1},
                             pins={0: 2, 1: 3}, pagesize=1048576))


class DifferencesTest(base.TestCase):

    scenarios = [
        ('same', {'change': lambda t: t, 'expected': []}),
        ('host_cell', {'change': lambda t: _set(t, host_cell=1),
                       'expected': ['recorded on host cell 0, XML binds '
                                    'memory to node 1']}),
        ('pins', {'change': lambda t: _set(t, cpu_pinning={0: 3, 1: 2}),
                  'expected': ['recorded pins 0->2 1->3, XML pins 0->3 '
                               '1->2']}),
        ('pagesize', {'change': lambda t: _set(t, pagesize=None),
                      'expected': ['recorded page size 1048576 KiB, XML '
                                   'backs it with small pages']}),
        ('cells', {'change': lambda t: None,
                   'expected': ['guest cells [0] recorded, none in the '
                                'XML']}),
    ]

    def test_difference(self):
        recorded = _recorded()
        before = recorded.obj_to_primitive()
        found = placement.differences(recorded, self.change(_recorded()))
        self.assertEqual(len(self.expected), len(found), found)
        for fragment, line in zip(self.expected, found, strict=True):
            self.assertIn(fragment, line)
        self.assertEqual(before, recorded.obj_to_primitive())


def _set(topology, **values):
    for name, value in values.items():
        setattr(topology.cells[0], name, value)
    return topology
