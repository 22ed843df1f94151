"""Memory changes in the conductor: record, ask the agent, record what
the guest really did (a mocked compute client answers for the guest)."""

from oslo_utils import uuidutils

from numamig import exception
from numamig import objects
from numamig.conductor.tasks import memory
from numamig.db import instances
from numamig.db import memory_changes
from tests.unit.conductor import base


def reclaim_on_host(worker, ctxt, change_uuid, host, node, size_mb, exact,
                    dry_run, conf):
    """A HostReclaimTask's answer (what ``host reclaim`` gets)."""
    return memory.HostReclaimTask(ctxt, worker, change_uuid, host, node,
                                  size_mb, exact, dry_run, conf).execute()


class MemoryChangeTest(base.ConductorTestCase):

    def setUp(self):
        super().setUp()
        # [virtio_mem] as shipped but a shorter deadline.
        self.settings = self.worker.settings.virtio_mem._replace(
            resize_timeout=7, max_loss_mb=1024)
        self.uuid = uuidutils.generate_uuid()
        topology = objects.InstanceNUMATopology(
            instance_uuid=self.uuid, cells=[
                objects.InstanceNUMACell(
                    id=i, host_cell=i, pcpuset={i}, cpu_pinning={i: i},
                    memory_mb=512, cpu_policy='dedicated',
                    virtio_mem_size_mb=512, virtio_mem_block_kb=2048,
                    virtio_mem_requested_mb=256,
                    virtio_mem_current_mb=256) for i in (0, 1)])
        instances.create(self.db, objects.Instance(
            uuid=self.uuid, name='g', project_id='demo', host='src', vcpus=2,
            memory_mb=1024, extra_specs={
                'hw:numa_nodes': '2', 'hw:cpu_policy': 'dedicated',
                'hw:virtio_mem_size': '512'},
            numa_topology=topology))
        self.asked = []

    def answer(self, current, reached=True):
        def resize(ctxt, host, instance_uuid, sizes, deadline, timeout):
            # What the record holds while the guest is being asked.
            self.asked.append((host, sizes, deadline, self.cells()))
            return {'current': {str(k): v for k, v in current.items()},
                    'reached': reached}
        self.compute_api.resize_virtio_mem.side_effect = resize

    def cells(self):
        topology = instances.get(self.db, self.uuid).instance.numa_topology
        return [(c.virtio_mem_requested_mb, c.virtio_mem_current_mb)
                for c in topology.cells]

    def set_memory(self, change, size_mb, node=1, **kwargs):
        kwargs.setdefault('exact', True)
        kwargs.setdefault('dry_run', False)
        return memory.SetInstanceMemoryTask(
            None, self.worker, change, self.uuid, node, size_mb,
            conf=self.settings, **kwargs).execute()

    def test_shrink_released_only_by_what_the_guest_unplugged(self):
        # Asked 256 -> 64 on node 1; the guest gets to 128 by the deadline.
        self.answer({0: 256, 1: 128}, reached=False)
        change = uuidutils.generate_uuid()
        done = self.set_memory(change, 320)
        # While asked: requested 64 recorded, current still 256 (held).
        self.assertEqual([('src', {1: 64}, 7, [(256, 256), (64, 256)])],
                         self.asked)
        self.assertEqual([(256, 256), (64, 128)], self.cells())
        guest, = done['result']['guests']
        self.assertEqual((128, False, 128),
                         (guest['released_mb'], guest['reached'],
                          done['result']['released_mb']))
        self.compute_api.refresh_usage.assert_called_once_with(
            None, 'src', timeout=5)
        # Delivered again: the recorded answer, the guest not asked again.
        self.assertEqual(done, self.set_memory(change, 320))
        self.assertEqual(1, len(self.asked))

    def test_growth_held_before_the_guest_is_asked(self):
        self.answer({0: 256, 1: 512})
        self.set_memory(uuidutils.generate_uuid(), 768)
        self.assertEqual([(256, 256), (512, 256)], self.asked[0][3])
        self.assertEqual([(256, 256), (512, 512)], self.cells())

    def test_refusal_restores_the_record(self):
        self.compute_api.resize_virtio_mem.side_effect = \
            exception.HypervisorError(host='src', action='resize',
                                      reason='not supported')
        change = uuidutils.generate_uuid()
        done = self.set_memory(change, 320)
        self.assertEqual([(256, 256), (256, 256)], self.cells())
        self.assertIn('not supported', done['result']['guests'][0]['error'])
        # Nothing changed: not 'done' (the CLI printed "done" and exit 1).
        self.assertEqual('failed', done['status'])
        self.assertEqual(done, memory_changes.get(self.db, change))
        self.assertEqual(
            "every guest refused, nothing changed: Hypervisor on src "
            "failed to resize: not supported", done['result']['error'])

    def test_a_guest_whose_domain_is_missing_is_refused_not_unknown(self):
        # Before: the whole change failed with "Instance ... could not be
        # found." and exit 127, for a guest that is recorded.
        self.compute_api.resize_virtio_mem.side_effect = \
            exception.InstanceNotFound(instance_uuid=self.uuid)
        done = self.set_memory(uuidutils.generate_uuid(), 320)
        self.assertEqual('failed', done['status'])
        self.assertEqual("host src has no domain of this guest (it is "
                         "recorded there)",
                         done['result']['guests'][0]['error'])
        self.assertEqual([(256, 256), (256, 256)], self.cells())

    def test_an_agent_that_did_not_answer_is_recorded_by_name(self):
        from numamig.compute import rpcapi as compute_rpcapi
        self.compute_api.resize_virtio_mem.side_effect = \
            compute_rpcapi.AgentCallTimeout(
                host='src', method='resize_virtio_mem', timeout=17,
                option='[virtio_mem] resize_timeout')
        change = uuidutils.generate_uuid()
        exc = self.assertRaises(exception.MigrationError, self.set_memory,
                                change, 320)
        recorded = memory_changes.get(self.db, change)
        self.assertEqual(('failed', str(exc)), (recorded['status'],
                                                recorded['result']['error']))
        self.assertIn('src did not answer resize_virtio_mem within 17 s',
                      str(exc))

    def test_some_guests_refused_is_partial(self):
        other = uuidutils.generate_uuid()
        record = instances.get(self.db, self.uuid).instance
        instances.create(self.db, objects.Instance(
            uuid=other, name='g2', project_id='demo', host='src', vcpus=2,
            memory_mb=1024, extra_specs=dict(record.extra_specs),
            numa_topology=objects.InstanceNUMATopology(
                instance_uuid=other,
                cells=[c.obj_clone() for c in
                       record.numa_topology.cells])))

        def resize(ctxt, host, instance_uuid, sizes, deadline, timeout):
            if instance_uuid == other:
                raise exception.HypervisorError(
                    host='src', action='resize', reason='not supported')
            return {'current': {str(k): v for k, v in sizes.items()},
                    'reached': True}
        self.compute_api.resize_virtio_mem.side_effect = resize
        done = reclaim_on_host(
            self.worker, None, uuidutils.generate_uuid(), 'src', 1, 512,
            True, False, self.settings)
        self.assertEqual('partial', done['status'])
        self.assertEqual([False, True], sorted(
            'error' in guest for guest in done['result']['guests']))
        self.assertNotIn('error', done['result'])

    def test_host_down_refused_before_anything_is_recorded(self):
        # Before: recorded, then each guest's resize waited its whole
        # deadline (40 s here) and the change ended failed.
        self.report('src', age_s=3600)
        change = uuidutils.generate_uuid()
        exc = self.assertRaises(exception.ComputeHostDown, self.set_memory,
                                change, 128)
        self.assertIn('Compute host src is down: its last report is 3600 s '
                      'old', str(exc))
        self.assertIsNone(memory_changes.get(self.db, change))
        self.compute_api.resize_virtio_mem.assert_not_called()
        # A plan only reads the records: still answered.
        planned = self.set_memory(uuidutils.generate_uuid(), 128,
                                  dry_run=True)
        self.assertEqual('planned', planned['status'])

    def test_node_the_host_does_not_have_refused(self):
        # Without the check the plan took all from nodes 0 and 1
        # ("elsewhere") and the command answered 0.
        for call in (
                lambda: self.set_memory(uuidutils.generate_uuid(), 128,
                                        node=7),
                lambda: reclaim_on_host(
                    self.worker, None, uuidutils.generate_uuid(), 'src', 5,
                    100, False, False, self.settings),
                lambda: reclaim_on_host(
                    self.worker, None, uuidutils.generate_uuid(), 'src', 5,
                    100, False, True, self.settings)):
            exc = self.assertRaises(exception.InvalidMemoryChange, call)
            self.assertRegex(str(exc), r'host src has no NUMA node [57]; '
                                       r'its nodes are 0, 1$')
        self.compute_api.resize_virtio_mem.assert_not_called()
        self.assertEqual([(256, 256), (256, 256)], self.cells())

    def test_dry_run_records_nothing(self):
        change = uuidutils.generate_uuid()
        planned = self.set_memory(change, 320, dry_run=True)
        self.assertEqual(('planned', -192), (planned['status'],
                                             planned['plan']['wanted_mb']))
        self.assertIsNone(memory_changes.get(self.db, change))
        self.compute_api.resize_virtio_mem.assert_not_called()

    def test_size_beyond_the_devices_refused(self):
        exc = self.assertRaises(exception.InvalidMemoryChange,
                                self.set_memory, uuidutils.generate_uuid(),
                                1025)
        self.assertIn('0 to 1024 MiB', str(exc))
        self.compute_api.resize_virtio_mem.assert_not_called()

    def test_growth_refused_when_the_node_lacks_memory(self):
        # Node 1 of 'src' is full (its report says so).
        topology = base.cbase.host_topology()
        topology.cells[1].memory_usage_mb = topology.cells[1].memory_mb
        self.report('src', topology=topology)
        exc = self.assertRaises(exception.InvalidMemoryChange,
                                self.set_memory, uuidutils.generate_uuid(),
                                768)
        self.assertIn('host node 1 has 0 MiB free', str(exc))
        self.compute_api.resize_virtio_mem.assert_not_called()

    def test_migrating_guest_refused(self):
        record = instances.get(self.db, self.uuid).instance
        context = objects.MigrationContext(
            instance_uuid=self.uuid, migration_uuid=uuidutils.generate_uuid(),
            source_host='src', dest_host='dst1',
            old_numa_topology=record.numa_topology,
            new_numa_topology=record.numa_topology)
        instances.set_migration_context(self.db, self.uuid, context)
        exc = self.assertRaises(exception.InvalidMemoryChange,
                                self.set_memory, uuidutils.generate_uuid(),
                                320)
        self.assertIn('is migrating', str(exc))

    def plug(self, node0_mb, node1_mb):
        """The guest's devices at these sizes (requested and plugged)."""
        topology = instances.get(self.db, self.uuid).instance \
            .numa_topology.obj_clone()
        for cell, size in zip(topology.cells, (node0_mb, node1_mb),
                              strict=True):
            cell.virtio_mem_requested_mb = cell.virtio_mem_current_mb = size
        instances.update(self.db, self.uuid, {'numa_topology': topology})

    def test_reclaim_nothing_can_give_refused_nothing_recorded(self):
        self.plug(0, 0)
        for exact, where in ((True, 'on host node 0'),
                             (False, 'on host node 0 or elsewhere')):
            for dry_run in (False, True):
                change = uuidutils.generate_uuid()
                exc = self.assertRaises(
                    exception.InvalidMemoryChange, reclaim_on_host,
                    self.worker, None, change, 'src', 0, 128, exact,
                    dry_run, self.settings)
                self.assertEqual(
                    f"the guests on src can give none of the 128 MiB asked "
                    f"{where}: nothing changed", exc.kwargs['reason'])
                self.assertIsNone(memory_changes.get(self.db, change))
        self.compute_api.resize_virtio_mem.assert_not_called()
        self.compute_api.refresh_usage.assert_not_called()
        self.assertEqual([(0, 0), (0, 0)], self.cells())

    def test_exact_change_the_node_cannot_make_refused(self):
        # Node 1's device has nothing plugged: --exact cannot shrink there.
        self.plug(256, 0)
        change = uuidutils.generate_uuid()
        exc = self.assertRaises(exception.InvalidMemoryChange,
                                self.set_memory, change, 128)
        self.assertEqual(
            f"instance {self.uuid} can give none of the 128 MiB asked on "
            f"host node 1: nothing changed", exc.kwargs['reason'])
        self.assertIsNone(memory_changes.get(self.db, change))
        # Without --exact the other node gives it.
        self.answer({0: 128, 1: 0})
        done = self.set_memory(uuidutils.generate_uuid(), 128, exact=False)
        self.assertEqual(0, done['plan']['short_mb'])

    def test_setting_the_size_it_has_is_no_refusal(self):
        done = self.set_memory(uuidutils.generate_uuid(), 512)
        self.assertEqual(('done', [], 0),
                         (done['status'], done['plan']['steps'],
                          done['plan']['short_mb']))
        self.compute_api.resize_virtio_mem.assert_not_called()
