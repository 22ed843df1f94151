"""Placement reclaim in the conductor: a destination refusing a guest
only for memory on one node is asked again once the guests there gave
it back; short or still refused, everything is given back."""

from unittest import mock

from oslo_utils import uuidutils

from numamig import exception
from numamig import objects
from numamig.conductor.tasks import placement_reclaim
from numamig.db import instances
from numamig.db import memory_changes
from numamig.db import migration_satellites
from numamig.db import migrations
from numamig.numa import usage
from tests.unit.compute import base as cbase
from tests.unit.conductor import base

FULL = exception.MigrationPreCheckError(reason="does not fit on dst1")


def _cell(cell_id, host_cell, pcpu, memory_mb, device=None):
    """A pinned guest cell; ``device``: (size, requested) MiB."""
    fields = {}
    if device:
        fields = {'virtio_mem_size_mb': device[0],
                  'virtio_mem_block_kb': 2048,
                  'virtio_mem_requested_mb': device[1],
                  'virtio_mem_current_mb': device[1]}
    return objects.InstanceNUMACell(
        id=cell_id, host_cell=host_cell, pcpuset={cell_id},
        cpu_pinning={cell_id: pcpu}, memory_mb=memory_mb,
        cpu_policy='dedicated', **fields)


class _ReclaimBase(base.ConductorTestCase):
    """dst1 lacks memory on both nodes; its node 0 has a guest with
    2048 MiB of slack."""

    def setUp(self):
        super().setUp()
        # [virtio_mem] as shipped (reclaim off), and turned on.
        self.off = self.worker.settings.virtio_mem
        self.on = self.off._replace(
            resize_timeout=7, max_loss_mb=4096, placement_reclaim=True,
            placement_reclaim_max_mb=4096)
        self.reconfigure(virtio_mem=self.on)
        # dst1 node 0: 4096 boot + a device of 4096 (floor 2048) of the
        # guest with slack; node 1 full with a guest without devices.
        self.slack_uuid = self._guest(
            [_cell(0, 0, 1, 4096, device=(4096, 4096))],
            {'hw:virtio_mem_size': '4096', 'hw:virtio_mem_min': '2048'})
        self._guest([_cell(0, 1, 5, 8192)], {})
        self.inst = self.create_instance()
        self.resized = []
        self.compute_api.resize_virtio_mem.side_effect = self._resize
        self.reached = True

    def _guest(self, cells, specs, host='dst1'):
        uuid = uuidutils.generate_uuid()
        topology = objects.InstanceNUMATopology(instance_uuid=uuid,
                                                cells=cells)
        instances.create(self.db, objects.Instance(
            uuid=uuid, name='g', project_id='demo', host=host,
            vcpus=sum(len(c.pcpuset) for c in cells),
            memory_mb=sum(c.memory_mb for c in cells),
            extra_specs=dict(specs, **{'hw:cpu_policy': 'dedicated'}),
            numa_topology=topology))
        self._report_host(host)
        return uuid

    def _report_host(self, host):
        guests = [r.instance.numa_topology
                  for r in instances.get_all(self.db, host=host)]
        self.report(host, topology=usage.host_with_usage(
            cbase.host_topology(), guests))

    def _resize(self, ctxt, host, instance_uuid, sizes, deadline, timeout):
        # A guest that does not move (reached False) keeps what it had.
        self.resized.append((host, instance_uuid, dict(sizes), deadline))
        answer = dict(sizes) if self.reached else {
            cell: self._device(instance_uuid)[1] for cell in sizes}
        return {'current': {str(k): v for k, v in answer.items()},
                'reached': answer == dict(sizes)}

    def _device(self, uuid):
        cell = instances.get(self.db, uuid).instance.numa_topology.cells[0]
        return cell.virtio_mem_requested_mb, cell.virtio_mem_current_mb

    def _refused(self):
        """Migrate to dst1, which refuses: NoValidHost; dst1's reason."""
        self.assertRaises(exception.NoValidHost, self.migrate,
                          self.inst.uuid, 'dst1')
        migration = self._migration()
        self.assertEqual('error', migration.status)
        return migration.refused_hosts['dst1']

    def _migration(self):
        (found,) = migrations.get_all(self.db, instance_uuid=self.inst.uuid)
        return found

    def _reclaimed(self, uuid=None):
        """The MigrationReclaim entries of the instance's migration."""
        uuid = uuid or self._migration().uuid
        return migration_satellites.get(self.db, uuid,
                                        ['reclaim'])['reclaim'].entries


class PlacementReclaimTest(_ReclaimBase):

    def test_refused_for_memory_reclaimed_then_claimed(self):
        self.answer_with(FULL, True)
        migration = self.migrate(self.inst.uuid, 'dst1')
        self.assertEqual(('queued', 'dst1'),
                         (migration.status, migration.dest_host))
        # The least whole blocks: 1024 MiB for the guest's one cell.
        self.assertEqual([('dst1', self.slack_uuid, {0: 3072}, 7)],
                         self.resized)
        self.assertEqual((3072, 3072), self._device(self.slack_uuid))
        self.assertEqual(2, self.compute_api.
                         check_can_live_migrate_destination.call_count)
        self.assertEqual([{
            'host': 'dst1', 'host_node': '0',
            'instance_uuid': self.slack_uuid, 'cell': '0',
            'before_mb': '4096', 'after_mb': '3072', 'current_mb': '3072',
            'released_mb': '1024', 'outcome': 'kept'}],
            self._reclaimed())
        self.compute_api.refresh_usage.assert_called_with(mock.ANY, 'dst1',
                                                          timeout=5)

    def test_run_again_finds_the_reclaim_done(self):
        self.answer_with(FULL, True)
        migration = self.migrate(self.inst.uuid, 'dst1')
        first = memory_changes.get(self.db, placement_reclaim.change_uuid(
            migration.uuid, 'dst1', 'reclaim'))
        self.assertEqual('done', first['status'])
        # The same placement's reclaim asked again (its task run again):
        # the recorded answer, no guest asked again.
        room = placement_reclaim.make_room(
            self.worker, None, 'dst1', mock.Mock(node=0, freed_mb=1024),
            migration.uuid)
        self.assertEqual(first['result'], room.result)
        self.assertEqual(1, len(self.resized))

    def test_short_guest_given_back_and_refused(self):
        self.reached = False
        self.answer_with(FULL)
        why = self._refused()
        self.assertIn('dst1 lacks 1024 MiB on host node 0', why)
        self.assertIn('did not give their part back within [virtio_mem] '
                      'resize_timeout (7 s); what the guests gave was '
                      'given back', why)
        # Asked for 3072, then given back its 4096.
        self.assertEqual([{0: 3072}, {0: 4096}],
                         [sizes for _, _, sizes, _ in self.resized])
        self.assertEqual((4096, 4096), self._device(self.slack_uuid))
        migration = self._migration()
        self.assertIn('fell short', migration.error)
        (entry,) = self._reclaimed(migration.uuid)
        self.assertEqual(('0', 'given back'), (entry['released_mb'],
                                               entry['outcome']))
        self.assertEqual(1, self.compute_api.
                         check_can_live_migrate_destination.call_count)

    def test_still_refused_after_reclaim_given_back(self):
        self.answer_with(FULL, FULL)
        self.assertIn('still refused once 1024 MiB were reclaimed on host '
                      'node 0 (what the guests gave was given back): does '
                      'not fit on dst1', self._refused())
        self.assertEqual([{0: 3072}, {0: 4096}],
                         [sizes for _, _, sizes, _ in self.resized])
        self.assertEqual((4096, 4096), self._device(self.slack_uuid))
        (entry,) = self._reclaimed()
        self.assertEqual(('1024', 'given back'),
                         (entry['released_mb'], entry['outcome']))

    def test_start_failing_after_the_claim_gives_it_back(self):
        self.answer_with(FULL, True)
        self.compute_api.live_migration.side_effect = \
            exception.MigrationError(reason='the cast failed')
        self.assertRaises(exception.MigrationError, self.migrate,
                          self.inst.uuid, 'dst1')
        self.assertEqual((4096, 4096), self._device(self.slack_uuid))
        (entry,) = self._reclaimed()
        self.assertEqual('given back', entry['outcome'])

    def test_off_by_default_plain_refusal(self):
        self.reconfigure(virtio_mem=self.off)
        self.answer_with(FULL)
        self.assertEqual('Migration pre-check error: does not fit on dst1',
                         self._refused())
        self.assertEqual([], self.resized)
        self.assertEqual([], self._reclaimed())

    def test_not_for_memory_no_reclaim_and_says_why(self):
        # dst1 loses every free pCPU: no reclaim can place the guest.
        self._guest([objects.InstanceNUMACell(
            id=0, host_cell=0, pcpuset={0, 1, 2, 3, 4, 5},
            cpu_pinning={0: 0, 1: 2, 2: 3, 3: 8, 4: 9, 5: 10},
            memory_mb=2, cpu_policy='dedicated'), objects.InstanceNUMACell(
            id=1, host_cell=1, pcpuset={6, 7, 8, 9, 10, 11, 12},
            cpu_pinning={6: 4, 7: 6, 8: 7, 9: 12, 10: 13, 11: 14, 12: 15},
            memory_mb=2, cpu_policy='dedicated')], {})
        self.answer_with(FULL)
        self.assertIn('does not fit on dst1; no placement reclaim: no '
                      'single host node can be freed enough',
                      self._refused())
        self.assertEqual([], self.resized)

    def test_new_guest_placed_after_reclaim(self):
        builds = []

        def build(ctxt, instance, host, **kwargs):
            builds.append(host)
            if len(builds) == 1:
                raise FULL
            return instance

        self.compute_api.build_instance.side_effect = build
        new = objects.Instance(
            uuid=uuidutils.generate_uuid(), name='new', project_id='demo',
            vcpus=2, memory_mb=1024,
            extra_specs={'hw:cpu_policy': 'dedicated'})
        with self.assertLogs('numamig.conductor.tasks.build',
                             'INFO') as logs:
            self.call('instance_create', new, 'dst1')
        self.assertEqual(['dst1', 'dst1'], builds)
        self.assertEqual((3072, 3072), self._device(self.slack_uuid))
        self.assertIn(f"guest {self.slack_uuid} cell 0 4096 -> 3072 MiB "
                      f"(kept)", '\n'.join(logs.output))

    def test_give_back_short_is_reported_as_such(self):
        self.answer_with(FULL, FULL)
        answers = iter([{0: 3072}, {0: 3584}])

        def resize(ctxt, host, instance_uuid, sizes, deadline, timeout):
            current = next(answers)
            self.resized.append(sizes)
            return {'current': {str(k): v for k, v in current.items()},
                    'reached': current == dict(sizes)}

        self.compute_api.resize_virtio_mem.side_effect = resize
        self.assertIn('giving it back did not complete', self._refused())
        (entry,) = self._reclaimed()
        self.assertEqual(('3584', 'not given back'),
                         (entry['current_mb'], entry['outcome']))
        # The record holds what the guest has: 4096 asked, 3584 plugged.
        self.assertEqual((4096, 3584), self._device(self.slack_uuid))

    def test_hypervisor_refusal_nothing_taken_nothing_to_give_back(self):
        self.answer_with(FULL)
        self.compute_api.resize_virtio_mem.side_effect = \
            exception.HypervisorError(
                host='dst1', action='resize', reason='no updateDeviceFlags')
        why = self._refused()
        self.assertIn(f'the hypervisor refused to resize guest(s) '
                      f'{self.slack_uuid}; what the guests gave was given '
                      f'back', why)
        self.assertEqual(1, self.compute_api.resize_virtio_mem.call_count)
        self.assertEqual((4096, 4096), self._device(self.slack_uuid))
        (entry,) = self._reclaimed()
        self.assertEqual(('0', 'refused'), (entry['released_mb'],
                                            entry['outcome']))


def _full(host_cell, first_pcpu):
    """A guest cell without a device taking a whole host node's memory."""
    return _cell(host_cell, host_cell, first_pcpu, 8192)


class _ScheduledBase(_ReclaimBase):
    """No host named: the scheduler refuses every host for memory, and
    only a reclaim places the guest."""

    def setUp(self):
        super().setUp()
        # dst2 and dst3 full on both nodes, no guest there has slack.
        for host in ('dst2', 'dst3'):
            self._guest([_full(0, 1), _full(1, 5)], {}, host=host)
        # A host told to recompute its usage reports it, as an agent
        # does before it answers: the scheduler's reservation then sees
        # the memory the guests gave.
        self.compute_api.refresh_usage.side_effect = \
            lambda ctxt, host, timeout: self._report_host(host)

    def _slack_guest(self, host):
        """``host`` as dst1: node 1 full, node 0 full of a guest with
        2048 MiB of slack; return that guest's uuid."""
        self._guest([_cell(0, 1, 5, 8192)], {}, host=host)
        return self._guest([_cell(0, 0, 1, 4096, device=(4096, 4096))],
                           {'hw:virtio_mem_size': '4096',
                            'hw:virtio_mem_min': '2048'}, host=host)


class ScheduledReclaimTest(_ScheduledBase):
    """A scheduled migration."""

    def _no_valid_host(self):
        self.assertRaises(exception.NoValidHost, self.migrate,
                          self.inst.uuid)
        migration = self._migration()
        self.assertEqual('error', migration.status)
        return migration

    def test_placed_only_through_reclaim(self):
        self.answer_with(True)
        migration = self.migrate(self.inst.uuid)
        self.assertEqual(('queued', 'dst1'),
                         (migration.status, migration.dest_host))
        self.assertEqual([('dst1', self.slack_uuid, {0: 3072}, 7)],
                         self.resized)
        # Reclaim first, then the one claim.
        self.assertEqual(1, self.compute_api.
                         check_can_live_migrate_destination.call_count)
        (entry,) = self._reclaimed()
        self.assertEqual(('dst1', '1024', 'kept'), (
            entry['host'], entry['released_mb'], entry['outcome']))
        # The scheduler's reservation holds the guest on dst1 now.
        held = self.worker.cache.get('dst1').reservations
        self.assertIn(self.inst.uuid, [r.instance_uuid for r in held])

    def test_every_candidate_refused_then_reclaim(self):
        # dst3 emptied: a candidate, which refuses at its claim.
        for record in instances.get_all(self.db, host='dst3'):
            instances.destroy(self.db, record.instance.uuid)
        self._report_host('dst3')
        self.answer_with(exception.MigrationPreCheckError(
            reason="dst3 says no"), True)
        migration = self.migrate(self.inst.uuid)
        self.assertEqual(('queued', 'dst1'),
                         (migration.status, migration.dest_host))
        self.assertIn('dst3 says no', migration.refused_hosts['dst3'])
        self.assertEqual(1, len(self.resized))

    def test_none_can_be_freed_no_valid_host_says_reclaim_considered(self):
        # The guest with slack keeps its floor: nothing to take.
        self.reconfigure(virtio_mem=self.on._replace(max_loss_mb=2))
        self.answer_with()
        migration = self._no_valid_host()
        self.assertIn('placement reclaim ([virtio_mem] placement_reclaim) '
                      'considered: 3 host(s) short only of memory within '
                      '4096 MiB, 3 looked at; none can be freed enough: ',
                      migration.error)
        self.assertIn('dst2: no guest on the host has virtio-mem slack '
                      'above its floor', migration.error)
        self.assertEqual([], self.resized)
        self.compute_api.check_can_live_migrate_destination.\
            assert_not_called()

    def test_none_qualifies_within_max_mb(self):
        self.reconfigure(virtio_mem=self.on._replace(placement_reclaim_max_mb=2))
        self.answer_with()
        migration = self._no_valid_host()
        self.assertIn('placement reclaim ([virtio_mem] placement_reclaim) '
                      'considered: no host is short only of memory within '
                      'placement_reclaim_max_mb (2 MiB)', migration.error)
        # The scheduler's own reasons come first.
        self.assertIn('dst1: NUMA topology does not fit', migration.error)

    def test_off_plain_no_valid_host(self):
        self.reconfigure(virtio_mem=self.off)
        self._no_valid_host()
        self.assertNotIn('placement reclaim', self._migration().error)
        self.assertEqual([], self.resized)

    def test_short_given_back_next_host_tried(self):
        other = self._slack_guest('dst2x')
        short = {self.slack_uuid}
        self.reached = True

        def resize(ctxt, host, instance_uuid, sizes, deadline, timeout):
            self.resized.append((host, instance_uuid, dict(sizes),
                                 deadline))
            answer = dict.fromkeys(sizes, 4096) \
                if instance_uuid in short else dict(sizes)
            return {'current': {str(k): v for k, v in answer.items()},
                    'reached': answer == dict(sizes)}

        self.compute_api.resize_virtio_mem.side_effect = resize
        self.answer_with(True)
        migration = self.migrate(self.inst.uuid)
        self.assertEqual(('queued', 'dst2x'),
                         (migration.status, migration.dest_host))
        self.assertIn('dst1 lacks 1024 MiB on host node 0; reclaiming it '
                      'from guests there fell short',
                      migration.refused_hosts['dst1'])
        self.assertEqual([('dst1', 'given back'), ('dst2x', 'kept')],
                         [(e['host'], e['outcome'])
                          for e in self._reclaimed(migration.uuid)])
        self.assertEqual((4096, 4096), self._device(self.slack_uuid))
        self.assertEqual((3072, 3072), self._device(other))

    def test_reservation_conflict_after_reclaim_is_a_refusal(self):
        other = self._slack_guest('dst2x')
        real = self.worker.scheduler.reserve
        calls = []

        def reserve(host, *args, **kwargs):
            calls.append(host)
            if len(calls) == 1:
                raise exception.ReservationConflict(
                    instance_uuid=self.inst.uuid, host=host,
                    reason="another guest took it")
            return real(host, *args, **kwargs)

        patcher = mock.patch.object(self.worker.scheduler, 'reserve',
                                    side_effect=reserve)
        patcher.start()
        self.addCleanup(patcher.stop)
        self.answer_with(True)
        migration = self.migrate(self.inst.uuid)
        self.assertEqual(['dst1', 'dst2x'], calls)
        self.assertEqual('dst2x', migration.dest_host)
        self.assertIn('another guest took it',
                      migration.refused_hosts['dst1'])
        self.assertEqual((4096, 4096), self._device(self.slack_uuid))
        self.assertEqual((3072, 3072), self._device(other))
        self.assertEqual(['given back', 'kept'],
                         [e['outcome']
                          for e in self._reclaimed(migration.uuid)])

    def test_retry_limit_bounds_reclaim_attempts(self):
        self._slack_guest('dst2x')
        self.reconfigure(migrate_max_retries=0)
        self.reached = False
        self.answer_with()
        migration = self._no_valid_host()
        self.assertIn('1 destination(s) tried', migration.error)
        self.assertEqual(['dst1'], [
            h for h, why in migration.refused_hosts.items()
            if 'fell short' in why])
        # Asked and given back on dst1 only.
        self.assertEqual({'dst1'}, {h for h, _, _, _ in self.resized})

    def test_dry_run_says_the_reclaim_and_changes_nothing(self):
        answer = self.call('live_migration_dry_run', self.inst.uuid)
        self.assertEqual('dst1', answer['dest_host'])
        self.assertEqual({'host': 'dst1', 'host_node': 0, 'freed_mb': 1024,
                          'steps': [{'instance_uuid': self.slack_uuid,
                                     'cell': 0, 'before_mb': 4096,
                                     'after_mb': 3072}]}, answer['reclaim'])
        self.assertIn('3 host(s) short only of memory',
                      answer['reclaim_note'])
        self.assertEqual([], self.resized)
        self.assertEqual((4096, 4096), self._device(self.slack_uuid))
        self.assertEqual([], migrations.get_all(
            self.db, instance_uuid=self.inst.uuid))
        self.assertEqual((), self.worker.cache.get('dst1').reservations)


class ScheduledBuildReclaimTest(_ScheduledBase):
    """A scheduled new guest (``instance create --auto``): the same walk
    as a scheduled migration (conductor.tasks.placing)."""

    def setUp(self):
        super().setUp()
        # src full as well (its guest holds 1024 MiB of node 0).
        self._guest([_cell(0, 0, 3, 7168), _full(1, 5)], {}, host='src')
        self.builds = []
        self.refuse_builds = 0
        self.compute_api.build_instance.side_effect = self._build
        self.new = objects.Instance(
            uuid=uuidutils.generate_uuid(), name='new', project_id='demo',
            vcpus=2, memory_mb=1024,
            extra_specs={'hw:cpu_policy': 'dedicated'})

    def _build(self, ctxt, instance, host, **kwargs):
        self.builds.append(host)
        if len(self.builds) <= self.refuse_builds:
            raise exception.MigrationPreCheckError(
                reason=f"does not fit on {host}")
        instance.host = host
        return instance

    def _create(self):
        with self.assertLogs('numamig.conductor', 'INFO') as logs:
            built = self.call('instance_create', self.new, None)
        return built, '\n'.join(logs.output)

    def _build_error(self):
        exc = self.assertRaises(exception.InstanceBuildError, self.call,
                                'instance_create', self.new, None)
        # Nothing recorded of a guest no host created.
        self.assertRaises(exception.InstanceNotFound, instances.get,
                          self.db, self.new.uuid)
        return str(exc)

    def test_placed_only_through_reclaim(self):
        built, logs = self._create()
        self.assertEqual('dst1', built.host)
        # Reclaim first, then the one build.
        self.assertEqual(['dst1'], self.builds)
        self.assertEqual([('dst1', self.slack_uuid, {0: 3072}, 7)],
                         self.resized)
        self.assertEqual((3072, 3072), self._device(self.slack_uuid))
        self.assertIn(f"Instance {self.new.uuid}: reclaimed for its "
                      f"placement on dst1: guest {self.slack_uuid} cell 0 "
                      f"4096 -> 3072 MiB (kept)", logs)
        change = memory_changes.get(self.db, placement_reclaim.change_uuid(
            self.new.uuid, 'dst1', 'reclaim'))
        self.assertEqual(('done', True), (change['status'],
                                          change['result']['all_reached']))
        held = self.worker.cache.get('dst1').reservations
        self.assertIn(self.new.uuid, [r.instance_uuid for r in held])

    def test_none_qualifies_one_line_says_reclaim_considered(self):
        self.reconfigure(virtio_mem=self.on._replace(max_loss_mb=2))
        why = self._build_error()
        self.assertIn(f'Instance {self.new.uuid} could not be created: ',
                      why)
        self.assertIn('dst1: NUMA topology does not fit', why)
        self.assertIn('; placement reclaim ([virtio_mem] placement_reclaim) '
                      'considered: 4 host(s) short only of memory within '
                      '4096 MiB, 4 looked at; none can be freed enough: ',
                      why)
        self.assertIn('dst2: no guest on the host has virtio-mem slack '
                      'above its floor', why)
        self.assertNotIn('\n', why)
        self.assertEqual([], self.resized)
        self.assertEqual([], self.builds)

    def test_none_within_max_mb(self):
        self.reconfigure(virtio_mem=self.on._replace(placement_reclaim_max_mb=2))
        self.assertIn('placement reclaim ([virtio_mem] placement_reclaim) '
                      'considered: no host is short only of memory within '
                      'placement_reclaim_max_mb (2 MiB)',
                      self._build_error())
        self.assertEqual([], self.builds)

    def test_off_plain_build_error(self):
        self.reconfigure(virtio_mem=self.off)
        self.assertNotIn('placement reclaim', self._build_error())
        self.assertEqual([], self.resized)

    def _short_on_dst1(self):
        """dst1's guest does not move; dst2x's does."""
        def resize(ctxt, host, instance_uuid, sizes, deadline, timeout):
            self.resized.append((host, instance_uuid, dict(sizes),
                                 deadline))
            answer = dict.fromkeys(sizes, 4096) \
                if instance_uuid == self.slack_uuid else dict(sizes)
            return {'current': {str(k): v for k, v in answer.items()},
                    'reached': answer == dict(sizes)}

        self.compute_api.resize_virtio_mem.side_effect = resize

    def test_short_given_back_next_host(self):
        other = self._slack_guest('dst2x')
        self._short_on_dst1()
        built, logs = self._create()
        self.assertEqual('dst2x', built.host)
        # dst1 was never asked to build: its guests fell short first.
        self.assertEqual(['dst2x'], self.builds)
        self.assertEqual((4096, 4096), self._device(self.slack_uuid))
        self.assertEqual((3072, 3072), self._device(other))
        self.assertIn(f"on dst1: guest {self.slack_uuid} cell 0 4096 -> "
                      f"4096 MiB (given back)", logs)
        self.assertIn(f"on dst2x: guest {other} cell 0 4096 -> 3072 MiB "
                      f"(kept)", logs)
        back = memory_changes.get(self.db, placement_reclaim.change_uuid(
            self.new.uuid, 'dst1', 'give-back'))
        self.assertEqual('done', back['status'])

    def test_still_refused_given_back_next_host(self):
        other = self._slack_guest('dst2x')
        self.refuse_builds = 1
        built, logs = self._create()
        self.assertEqual('dst2x', built.host)
        self.assertEqual(['dst1', 'dst2x'], self.builds)
        self.assertEqual((4096, 4096), self._device(self.slack_uuid))
        self.assertEqual((3072, 3072), self._device(other))
        self.assertIn(f"on dst1: guest {self.slack_uuid} cell 0 4096 -> "
                      f"4096 MiB (given back)", logs)

    def test_every_host_refuses_one_line_with_each_reason(self):
        self.refuse_builds = 1
        why = self._build_error()
        self.assertIn('dst1: Migration pre-check error: still refused once '
                      '1024 MiB were reclaimed on host node 0 (what the '
                      'guests gave was given back): does not fit on dst1',
                      why)
        self.assertIn('placement reclaim ([virtio_mem] placement_reclaim) '
                      'considered: ', why)
        self.assertEqual((4096, 4096), self._device(self.slack_uuid))
