"""Tests of Instance, MigrationContext and ComputeNodeReport validation."""

import testscenarios

from tests import base
from tests.unit.objects import samples
from tests.unit.objects import validation

load_tests = testscenarios.load_tests_apply_scenarios


_set = validation.setting


def _drop_topology_vcpu(instance):
    instance.numa_topology.cells[1].cpuset = set()


def _shrink_topology_memory(instance):
    instance.numa_topology.cells[1].memory_mb = 512


class ValidationErrorTest(validation.RejectsRows, base.TestCase):
    """Each row breaks one invariant; validate() must name it."""

    scenarios = [
        ('instance_zero_vcpus',
         {'build': samples.instance, 'mutate': _set(vcpus=0),
          'fragment': 'Invalid Instance: vcpus must be positive, got 0'}),
        ('instance_negative_memory',
         {'build': samples.instance, 'mutate': _set(memory_mb=-1),
          'fragment': 'memory_mb must be positive, got -1'}),
        ('instance_topology_vcpus_differ',
         {'build': samples.instance, 'mutate': _drop_topology_vcpu,
          'fragment': 'NUMA topology has 5 vCPUs, the instance 6'}),
        ('instance_topology_memory_differs',
         {'build': samples.instance, 'mutate': _shrink_topology_memory,
          'fragment': 'NUMA topology has 1536 MiB, the instance 2048 MiB'}),
        ('context_same_hosts',
         {'build': samples.migration_context, 'mutate': _set(dest_host='src'),
          'fragment': 'Invalid MigrationContext: source and destination '
                      'are both src'}),
        ('report_service_version_zero',
         {'build': samples.compute_node_report,
          'mutate': _set(service_version=0),
          'fragment': 'service_version must be at least 1, got 0'}),
        ('report_not_a_fingerprint',
         {'build': samples.compute_node_report,
          'mutate': _set(fingerprint='abc'),
          'fragment': "fingerprint 'abc' is not a podfingerprint v001"}),
        ('report_bad_topology',
         {'build': samples.compute_node_report,
          'mutate': lambda r: setattr(r.topology.cells[0], 'cpuset',
                                       {0, 1, 2}),
          'fragment': 'Invalid HostNUMACell: cell 0: CPUs [2] are both'}),
    ]


class InstanceTest(base.TestCase):

    def test_without_numa_topology_is_valid(self):
        instance = samples.instance()
        instance.numa_topology = None
        instance.validate()

    def test_defaults(self):
        instance = type(samples.instance())(
            uuid=samples.uuids.other, name='g', vcpus=1, memory_mb=64)
        self.assertEqual(('unknown', None, {}, {}, None),
                         (instance.power_state, instance.host,
                          instance.extra_specs, instance.image_properties,
                          instance.numa_topology))

    def test_extra_specs_must_be_strings(self):
        instance = samples.instance()
        # DictOfStrings coerces, so numbers become their text; the specs
        # parser sees exactly what an operator would have typed.
        instance.extra_specs = {'hw:numa_nodes': 2}
        self.assertEqual({'hw:numa_nodes': '2'}, instance.extra_specs)
