"""Tests of numamig.conductor.tasks.build: what a new guest may carry."""

from oslo_utils import uuidutils

from numamig import exception
from numamig import objects
from numamig.db import instances
from tests.unit.conductor import base


def _instance(specs):
    uuid = uuidutils.generate_uuid()
    return objects.Instance(uuid=uuid, name='guest', project_id='demo',
                            vcpus=2, memory_mb=1024, extra_specs=dict(specs))


class UnknownSpecTest(base.ConductorTestCase):

    def test_typo_refused_before_anything_is_recorded(self):
        self.assertRaises(exception.UnknownNUMASpec, self.call,
                          'instance_create',
                          _instance({'hw:cpu_polcy': 'dedicated'}),
                          'src')
        self.assertEqual([], instances.get_all(self.db))
        self.compute_api.build_instance.assert_not_called()

    def test_foreign_key_of_the_configuration_passes(self):
        self.reconfigure(foreign_numa_specs=('hw:watchdog_action',))
        self.compute_api.build_instance.side_effect = \
            lambda ctxt, instance, host, **kw: instance
        self.call('instance_create',
                  _instance({'hw:watchdog_action': 'reset'}), 'src')
        self.compute_api.build_instance.assert_called_once()


class UnknownHostTest(base.ConductorTestCase):
    """A named host that never reported is bad input, refused first."""

    def test_unknown_host_refused_before_anything_is_recorded(self):
        self.assertRaisesMessage(exception.HostNotFound, 'nowhere',
                                 self.call, 'instance_create',
                                 _instance({}), 'nowhere')
        self.assertEqual([], instances.get_all(self.db))
        self.compute_api.build_instance.assert_not_called()
