"""Any request document numa fit is given: a fit, a "no" or bad input.

Hypothesis builds request documents from the keys numa fit reads, with
values of every JSON type and size (absurd vCPU counts, nested objects,
lists where objects belong, unknown spec keys). Whatever it builds, the
case ends as a fit, a "does not fit" or bad input (exit 0, 1 or 2),
never an unexpected error (255), and within a fixed memory bound.
"""

import json
import os
import tracemalloc

import hypothesis
from hypothesis import strategies as st

from numamig.cmd.manage_commands import numa as numa_cmd
from numamig.numa import specs
from tests import base

HOST = os.path.join(os.path.dirname(__file__), '..', '..', '..', 'etc',
                    'numamig', 'examples', 'host-2cell-smt.json')
# Bytes a single case may allocate at its peak.
MEMORY_BOUND = 64 * 1024 * 1024

_scalars = st.one_of(
    st.none(), st.booleans(), st.text(max_size=12),
    st.integers(min_value=-2, max_value=10 ** 12),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from(['dedicated', 'shared', 'mixed', 'large', 'any',
                     '^0', '0-3', '0,^1', '1GB', 'yes', 'isolate']))
_values = st.recursive(_scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=3),
    st.dictionaries(st.text(max_size=5), inner, max_size=3)), max_leaves=6)
_spec_keys = st.sampled_from(
    [s.flavor_key for s in specs.SPECS] +
    [f'{s.flavor_key}.{n}' for s in specs.SPECS if s.per_cell
     for n in (0, 1, 7)] + ['hw:cpu_polcy', 'quota:x'])
_image_keys = st.sampled_from(
    [s.image_key for s in specs.SPECS if s.image_key] + ['hw_nope'])
_requests = st.fixed_dictionaries(
    {'vcpus': st.one_of(st.integers(min_value=-1, max_value=10 ** 9),
                        _values),
     'memory_mb': st.one_of(st.integers(min_value=-1,
                                        max_value=10 ** 12), _values)},
    optional={'extra_specs': st.one_of(
                  st.dictionaries(_spec_keys, _values, max_size=4), _values),
              'image_properties': st.one_of(
                  st.dictionaries(_image_keys, _values, max_size=3),
                  _values),
              'limits': st.one_of(st.dictionaries(
                  st.sampled_from(['cpu_allocation_ratio',
                                   'ram_allocation_ratio']), _values),
                  _values),
              'pagesize_kb': _values})


class FitFuzzTest(base.TestCase):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        with open(HOST, encoding='utf-8') as handle:
            cls.host = json.load(handle)

    @hypothesis.settings(max_examples=300, deadline=None, database=None)
    @hypothesis.given(_requests)
    def test_ends_as_fit_no_or_bad_input(self, request):
        tracemalloc.start()
        try:
            outcome, _ = numa_cmd._fit_case(self.host, request, 'spread')
            self.assertIn(outcome['fits'], (True, False))
        except numa_cmd._BAD_INPUT:
            pass
        finally:
            _, peak = tracemalloc.get_traced_memory()
            tracemalloc.stop()
        self.assertLess(peak, MEMORY_BOUND, json.dumps(request)[:300])
