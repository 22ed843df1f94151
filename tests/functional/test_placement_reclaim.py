"""Placement reclaim end to end, over the in-process transport and RabbitMQ.

Two libvirt test-driver hosts (2 cells of 16 GiB, 11 GiB of small pages
each) behind the real conductor with ``[virtio_mem] placement_reclaim``
on. On host-b a guest with an 8 GiB virtio-mem device (floor 0) holds
9 GiB of node 0 and a pinned guest fills node 1, so a 4 GiB pinned
guest from host-a fits host-b only once node 0 gets 2 GiB back.

The test driver has no updateDeviceFlags: it refuses every resize. The
refusal is the failure path (the migration ends ``error``, nothing
changed, the record says the hypervisor refused). For the success path
the test stands in for the guest's driver on host-b: the agent's
``resize_virtio_mem`` answers that the guest reached what it was asked
(what a real guest with the virtio_mem driver does, measured on the real
tier: see test_real_virtio_mem) - labelled as such, the rest (records,
claims, the retried destination check, the CLI) is real.

Scheduled (no destination named), the scheduler refuses host-b before
any destination is asked; the conductor then considers the hosts it
refused only for memory on one node: the dry run says what it would
reclaim from whom, the migration reclaims then claims, and the
hypervisor's refusal ends it "No valid host" saying reclaim was
considered. A scheduled new guest (``instance create --auto``, host-a
disabled) goes the same way: created on host-b once its guest gave
memory back, or, refused by the hypervisor, not created, with one line
saying what was considered.
"""

import contextlib
import io
import json

import fixtures
import testscenarios

from numamig import embedded
from numamig.cmd import manage
from tests import base
from tests.fixtures import deployment
from tests.fixtures import rpc as rpc_fixture

load_tests = testscenarios.load_tests_apply_scenarios

DEDICATED = ('--property', 'hw:cpu_policy=dedicated', '--property',
             'hw:numa_nodes=1')


class PlacementReclaimTestCase(base.TestCase):

    scenarios = rpc_fixture.TRANSPORT_SCENARIOS

    def setUp(self):
        super().setUp()
        self.flags(group='virtio_mem', resize_timeout=5, max_loss_mb=4096,
                   placement_reclaim=True, placement_reclaim_max_mb=4096)
        fixture = self.useFixture(deployment.DeploymentFixture(
            self.transport_kind,
            [embedded.HostDefinition('host-a', 'numa-2cell-a.xml'),
             embedded.HostDefinition('host-b', 'numa-2cell-b.xml')],
            cli_names=True))
        self.dep = fixture.deployment
        self.config = fixture.cli_config()
        self.slack = self._create('host-b', 1, 1024, '--property',
                                  'hw:virtio_mem_size=8192', '--property',
                                  'hw:virtio_mem_min=0')
        self._create('host-b', 1, 11264)
        self.guest = self._create('host-a', 2, 4096)
        self.dep.report_all()

    def cli(self, *argv):
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), \
                contextlib.redirect_stderr(err):
            code = manage.main(['--config-file', self.config, *argv])
        return code, out.getvalue(), err.getvalue()

    def json_of(self, *argv, expected=0):
        code, out, err = self.cli(*argv, '--format', 'json')
        self.assertEqual(expected, code, out + err)
        return json.loads(out)

    def _create(self, host, vcpus, memory_mb, *extra):
        return self.json_of('instance', 'create', '--host', host, '--vcpus',
                            str(vcpus), '--memory', str(memory_mb),
                            *DEDICATED, *extra)['uuid']

    def _device(self):
        shown = self.json_of('instance', 'show', self.slack, '--no-xml')
        (cell,) = shown['numa_topology']['cells']
        return (cell['host_cell'], cell['virtio_mem_requested_mb'],
                cell['virtio_mem_current_mb'])

    def test_reclaimed_then_migrated(self):
        driver = self.dep.agent('host-b').driver
        # Stands in for the guest's virtio_mem driver (see above).
        self.useFixture(fixtures.MockPatchObject(
            driver, 'resize_virtio_mem',
            side_effect=lambda uuid, sizes, deadline: (dict(sizes), True)))
        moved = self.json_of('migration', 'start', self.guest, '--host',
                             'host-b', '--wait')
        self.assertEqual(('completed', 'host-b'),
                         (moved['status'], moved['dest_host']))
        self.assertEqual((0, 6144, 6144), self._device())
        shown = self.json_of('migration', 'show', moved['uuid'])
        self.assertEqual([{
            'host': 'host-b', 'host_node': 0, 'instance_uuid': self.slack,
            'cell': 0, 'before_mb': 8192, 'after_mb': 6144,
            'current_mb': 6144, 'released_mb': 2048, 'outcome': 'kept'}],
            shown['memory_reclaim'])
        code, out, _ = self.cli('migration', 'show', moved['uuid'])
        self.assertEqual(0, code)
        self.assertIn('memory reclaimed to place it: 2048 MiB kept', out)
        self.assertIn(f'host-b node 0: guest {self.slack} cell 0: 8192 -> '
                      f'6144 MiB asked, 6144 MiB plugged, released 2048 '
                      f'MiB, kept', out)
        # The guest runs on node 0, next to what the other guest kept.
        guest = self.json_of('instance', 'show', self.guest, '--no-xml')
        self.assertEqual([0], [c['host_cell'] for c in
                               guest['numa_topology']['cells']])

    def test_hypervisor_refuses_migration_fails_nothing_changed(self):
        before = self._device()
        code, out, err = self.cli('migration', 'start', self.guest,
                                  '--host', 'host-b', '--wait', '--format',
                                  'json')
        self.assertEqual(1, code, out + err)
        ended = json.loads(out)
        self.assertEqual('error', ended['status'])
        reason = ended['refused_hosts']['host-b']
        self.assertIn('host-b lacks 2048 MiB on host node 0; reclaiming it '
                      'from guests there fell short: the hypervisor refused '
                      f'to resize guest(s) {self.slack}', reason)
        self.assertEqual(before, self._device())
        shown = self.json_of('migration', 'show', ended['uuid'])
        (entry,) = shown['memory_reclaim']
        self.assertEqual(('refused', 0, 8192, None),
                         (entry['outcome'], entry['released_mb'],
                          entry['before_mb'], entry['current_mb']))
        guest = self.json_of('instance', 'show', self.guest, '--no-xml')
        self.assertEqual('host-a', guest['host'])

    def test_scheduled_dry_run_then_reclaimed_and_migrated(self):
        # No destination named: the scheduler refuses host-b (node 0
        # short of 2048 MiB, node 1 full); only a reclaim places it.
        before = self._device()
        plan = self.json_of('migration', 'start', self.guest, '--dry-run')
        self.assertEqual('host-b', plan['dest_host'])
        self.assertEqual({'host': 'host-b', 'host_node': 0,
                          'freed_mb': 2048,
                          'steps': [{'instance_uuid': self.slack, 'cell': 0,
                                     'before_mb': 8192, 'after_mb': 6144}]},
                         plan['reclaim'])
        code, out, _ = self.cli('migration', 'start', self.guest,
                                '--dry-run')
        self.assertEqual(0, code)
        self.assertIn('only a reclaim places it: would go to host-b once '
                      '2048 MiB are reclaimed on its host node 0', out)
        # The dry run changed nothing.
        self.assertEqual(before, self._device())
        self.assertEqual([], self.json_of('migration', 'list')['migrations'])
        driver = self.dep.agent('host-b').driver
        # Stands in for the guest's virtio_mem driver (see above).
        self.useFixture(fixtures.MockPatchObject(
            driver, 'resize_virtio_mem',
            side_effect=lambda uuid, sizes, deadline: (dict(sizes), True)))
        moved = self.json_of('migration', 'start', self.guest, '--wait')
        self.assertEqual(('completed', 'host-b'),
                         (moved['status'], moved['dest_host']))
        self.assertEqual((0, 6144, 6144), self._device())
        shown = self.json_of('migration', 'show', moved['uuid'])
        self.assertEqual([('host-b', 2048, 'kept')],
                         [(e['host'], e['released_mb'], e['outcome'])
                          for e in shown['memory_reclaim']])

    def test_scheduled_hypervisor_refuses_no_valid_host(self):
        before = self._device()
        code, out, err = self.cli('migration', 'start', self.guest,
                                  '--wait', '--format', 'json')
        self.assertEqual(1, code, out + err)
        ended = json.loads(out)
        self.assertEqual('error', ended['status'])
        self.assertIn('No valid host', ended['error'])
        self.assertIn('placement reclaim ([virtio_mem] placement_reclaim) '
                      'considered: 1 host(s) short only of memory',
                      ended['error'])
        self.assertIn('host-b lacks 2048 MiB on host node 0; reclaiming it '
                      'from guests there fell short: the hypervisor refused '
                      f'to resize guest(s) {self.slack}',
                      ended['refused_hosts']['host-b'])
        self.assertEqual(before, self._device())
        guest = self.json_of('instance', 'show', self.guest, '--no-xml')
        self.assertEqual('host-a', guest['host'])

    def _create_auto(self, expected):
        """A 4 GiB pinned guest, scheduled; host-a is disabled, so only
        a reclaim on host-b places it."""
        code, out, err = self.cli('host', 'disable', 'host-a', '--reason',
                                  'full for this test')
        self.assertEqual(0, code, out + err)
        return self.json_of('instance', 'create', '--auto', '--vcpus', '2',
                            '--memory', '4096', *DEDICATED,
                            expected=expected)

    def test_scheduled_new_guest_reclaimed_then_created(self):
        driver = self.dep.agent('host-b').driver
        # Stands in for the guest's virtio_mem driver (see above).
        self.useFixture(fixtures.MockPatchObject(
            driver, 'resize_virtio_mem',
            side_effect=lambda uuid, sizes, deadline: (dict(sizes), True)))
        created = self._create_auto(0)
        self.assertEqual('host-b', created['host'])
        self.assertEqual((0, 6144, 6144), self._device())
        # The new guest runs on node 0, next to what the other guest kept.
        guest = self.json_of('instance', 'show', created['uuid'],
                             '--no-xml')
        self.assertEqual([0], [c['host_cell'] for c in
                               guest['numa_topology']['cells']])

    def test_scheduled_new_guest_hypervisor_refuses_nothing_created(self):
        before = self._device()
        listed = len(self.json_of('instance', 'list')['instances'])
        failed = self._create_auto(1)
        (line,) = failed['error'].splitlines()
        self.assertIn('could not be created', line)
        self.assertIn('host-b: Migration pre-check error: host-b lacks 2048 '
                      'MiB on host node 0; reclaiming it from guests there '
                      'fell short: the hypervisor refused to resize '
                      f'guest(s) {self.slack}', line)
        self.assertIn('placement reclaim ([virtio_mem] placement_reclaim) '
                      'considered: 1 host(s) short only of memory', line)
        self.assertEqual(before, self._device())
        self.assertEqual(listed,
                         len(self.json_of('instance', 'list')['instances']))
