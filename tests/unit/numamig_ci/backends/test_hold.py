"""Which backends can hold a migration in progress, and where the real
ones put the dirtying kernel their libvirtd hosts boot the guest from."""

import os
import types

import fixtures

from numamig_ci import libvirt_hosts
from numamig_ci import scenarios  # noqa: F401 (registers them)
from numamig_ci.backends import deployment
from numamig_ci.backends import embedded
from numamig_ci.backends import local_libvirt
from numamig_ci.backends import nested
from numamig_ci.results import ScenarioSkipped
from numamig_ci.scenarios import registry
from tests import base

GUEST = types.SimpleNamespace(uuid='0f6d3a52-7c1e-4d2b-9a8e-3b4c5d6e7f80',
                              memory_mb=128)


class FakeAgent:
    """The nested agent: writes the kernel into its machine's dir."""

    def __init__(self, directory):
        self.directory = directory
        self.calls = []

    def write_dirtying_kernel(self, name, top_mib):
        self.calls.append((name, top_mib))
        return f'/tmp/numamig-hosts/{name}'


class LocalLibvirtHoldTest(base.TestCase):

    def setUp(self):
        super().setUp()
        self.state = self.useFixture(fixtures.TempDir()).path
        self.backend = local_libvirt.LocalLibvirtBackend(
            2, state_dir=self.state)
        self.backend.deployment.libvirt = {
            'h1': types.SimpleNamespace(uri='qemu+unix:///system?socket=/s')}

    def test_kernel_in_the_state_dir_and_the_source_uri(self):
        hold = self.backend.hold_migration('h1', GUEST)
        self.assertEqual('qemu+unix:///system?socket=/s', hold.uri)
        self.assertEqual(GUEST.uuid, hold.uuid)
        self.assertEqual(os.path.join(self.state, 'dirtying-96m.bin'),
                         hold.kernel_path)
        with open(hold.kernel_path, 'rb') as f:
            self.assertEqual(libvirt_hosts.dirtying_kernel(96), f.read())

    def test_too_small_a_guest_skips(self):
        small = types.SimpleNamespace(uuid=GUEST.uuid, memory_mb=16)
        exc = self.assertRaises(ScenarioSkipped, self.backend.hold_migration,
                                'h1', small)
        self.assertIn('too small', str(exc))


class NestedHoldTest(base.TestCase):

    def test_kernel_written_in_every_machine(self):
        backend = nested.NestedBackend(state_dir=self.useFixture(
            fixtures.TempDir()).path, log=lambda line: None)
        agents = [FakeAgent('a'), FakeAgent('b')]
        backend.deployment.machines = [types.SimpleNamespace(agent=a)
                                       for a in agents]
        backend.deployment.libvirt = {'h1': types.SimpleNamespace(
            uri='qemu+tcp://127.0.0.1:5000/system')}
        hold = backend.hold_migration('h1', GUEST)
        self.assertEqual('/tmp/numamig-hosts/dirtying-96m.bin',
                         hold.kernel_path)
        self.assertEqual('qemu+tcp://127.0.0.1:5000/system', hold.uri)
        for agent in agents:
            self.assertEqual([('dirtying-96m.bin', 96)], agent.calls)


class FeaturesTest(base.TestCase):
    """``requires`` of the abort scenarios against what backends offer."""

    def test_real_tiers_hold_a_real_copy(self):
        state = self.useFixture(fixtures.TempDir()).path
        for backend in (local_libvirt.LocalLibvirtBackend(2, state_dir=state),
                        nested.NestedBackend(state_dir=state,
                                             log=lambda line: None)):
            for name in ('abort', 'abort-copying', 'abort-paused'):
                self.assertIsNone(
                    registry.SCENARIOS[name].missing(backend), name)

    def test_embedded_holds_the_source_only(self):
        backend = types.SimpleNamespace(
            name='embedded', features=embedded.EmbeddedBackend.features)
        self.assertIsNone(registry.SCENARIOS['abort'].missing(backend))
        self.assertIn('real QEMU memory copy',
                      registry.SCENARIOS['abort-copying'].missing(backend))

    def test_a_deployment_cannot_hold(self):
        backend = types.SimpleNamespace(name='deployment', features=frozenset(
            {'qemu_threads', 'multi_node'}))
        self.assertIn('migration held in progress',
                      registry.SCENARIOS['abort'].missing(backend))
        self.assertFalse(hasattr(deployment.DeploymentBackend,
                                 '_dirtying_kernel'))
