"""Tests of the conductor's live-migration task and dry run."""

import fixtures
import oslo_messaging as messaging

from numamig import attempts
from numamig import cpumodel
from numamig import exception
from numamig import objects
from numamig.conductor import records
from numamig.conductor.tasks import live_migrate
from numamig.db import instances
from numamig.db import migrations
from numamig.db import queue
from numamig.numa import instance_request
from tests.unit.compute import base as cbase
from tests.unit.conductor import base


def _refusal(host):
    return exception.MigrationPreCheckError(reason=f"{host} is full")


class LiveMigrationTaskTest(base.ConductorTestCase):

    def _migrate(self, inst, dest_host=None):
        return self.migrate(inst.uuid, dest_host)

    def _only_migration(self, inst):
        (migration,) = migrations.get_all(self.db, instance_uuid=inst.uuid)
        return migration

    def test_requested_destination_is_claimed_then_cast(self):
        inst = self.create_instance()
        self.answer_with(True)
        migration = self._migrate(inst, 'dst2')
        self.assertEqual(('queued', 'dst2'),
                         (migration.status, migration.dest_host))
        cast = self.compute_api.live_migration.call_args[0]
        self.assertEqual((inst.uuid, migration.uuid, 'dst2'),
                         (cast[1].uuid, cast[2].uuid, cast[3].dest_host))
        history = [c.status for c in self._only_migration(inst).history]
        self.assertEqual(['accepted', 'queued'], history)

    def test_first_candidate_refuses_second_takes_it(self):
        inst = self.create_instance()
        self.answer_with(_refusal('first'), True)
        migration = self._migrate(inst)
        tried = [c[0][2] for c in self.compute_api.
                 check_can_live_migrate_destination.call_args_list]
        self.assertEqual(2, len(tried))
        self.assertNotIn('src', tried)
        self.assertEqual(tried[1], migration.dest_host)
        self.assertEqual({tried[0]: 'Migration pre-check error: first is '
                                    'full'}, migration.refused_hosts)
        self.assertEqual((), self.conductor.cache.get(tried[0]).reservations)

    def test_every_candidate_refuses(self):
        inst = self.create_instance()
        # The second asked four times (each a share of check_timeout)
        # before it counts as not answering.
        self.answer_with(_refusal('a'),
                         *[messaging.MessagingTimeout()] *
                         live_migrate.DESTINATION_ATTEMPTS, _refusal('c'))
        exc = self.assertRaises(exception.NoValidHost, self._migrate, inst)
        self.assertIn('3 destination(s) tried', str(exc))
        migration = self._only_migration(inst)
        self.assertEqual('error', migration.status)
        self.assertIn('did not answer within 5 s', migration.error)
        self.assertIn('a is full', migration.error)
        self.assertEqual(3, len(migration.refused_hosts))
        for host in ('dst1', 'dst2', 'dst3'):
            self.assertEqual((), self.conductor.cache.get(host).reservations)
        self.assertIsNone(instances.get(self.db, inst.uuid)
                          .instance.migration_context)
        self.compute_api.live_migration.assert_not_called()

    def test_a_destination_that_timed_out_loses_its_late_claim(self):
        inst = self.create_instance()
        checks = self.compute_api.check_can_live_migrate_destination

        def claim_late_then_time_out(ctxt, instance, host, migration,
                                     limits, timeout=None,
                                     source_data=None):
            if checks.call_count == 1:
                # The destination recorded its claim after the conductor
                # stopped waiting.
                instances.set_migration_context(
                    self.db, instance.uuid, self._context(
                        instance, migration, host))
            if checks.call_count <= live_migrate.DESTINATION_ATTEMPTS:
                raise messaging.MessagingTimeout()
            return self._lmd(instance, migration, host)
        checks.side_effect = claim_late_then_time_out
        migration = self._migrate(inst)
        first = checks.call_args_list[0][0][2]
        dropped = self.compute_api.drop_move_claim_at_destination
        self.assertEqual([first], [c[0][2].dest_host
                                   for c in dropped.call_args_list])
        self.assertNotEqual(first, migration.dest_host)
        self.assertIsNone(instances.get(self.db, inst.uuid)
                          .instance.migration_context)

    def test_an_answer_lost_once_is_asked_for_again(self):
        # A broker restart lost the destination's answer: asked again
        # (the check is idempotent), it takes the guest; no refusal.
        inst = self.create_instance()
        self.answer_with(messaging.MessagingTimeout(), True)
        migration = self._migrate(inst)
        checks = self.compute_api.check_can_live_migrate_destination
        hosts = [c[0][2] for c in checks.call_args_list]
        self.assertEqual(2, len(hosts))
        self.assertEqual(hosts[0], hosts[1])
        self.assertEqual(hosts[0], migration.dest_host)
        self.assertEqual({}, migration.refused_hosts)
        # Each attempt waits its share: together, check_timeout.
        self.assertEqual(attempts.attempt_shares(
            5, live_migrate.DESTINATION_ATTEMPTS)[:2],
            [c[1]['timeout'] for c in checks.call_args_list])
        self.compute_api.drop_move_claim_at_destination.assert_not_called()

    def _context(self, instance, migration, host):
        return objects.MigrationContext(
            instance_uuid=instance.uuid, migration_uuid=migration.uuid,
            source_host='src', dest_host=host,
            old_numa_topology=instance.numa_topology,
            new_numa_topology=instance.numa_topology)

    def _lmd(self, instance, migration, host):
        return objects.LiveMigrateData(
            instance_uuid=instance.uuid, source_host=instance.host,
            dest_host=host, migration_uuid=migration.uuid)

    def test_max_retries_limits_the_candidates_tried(self):
        self.reconfigure(migrate_max_retries=0)
        inst = self.create_instance()
        self.answer_with(_refusal('a'), True)
        exc = self.assertRaises(exception.NoValidHost, self._migrate, inst)
        self.assertIn('2 more not tried', str(exc))
        self.assertEqual(1, self.compute_api.
                         check_can_live_migrate_destination.call_count)

    def _busy_at(self, *busy_hosts):
        """set_dest_host refuses ``busy_hosts`` as another worker's
        migrations would have filled them since the choice."""
        original = migrations.set_dest_host

        def set_dest_host(db, uuid, host, max_incoming=None):
            if host in busy_hosts:
                raise exception.DestinationBusy(host=host, count=4, limit=4)
            return original(db, uuid, host, max_incoming=max_incoming)
        self.useFixture(fixtures.MockPatchObject(
            live_migrate.migrations, 'set_dest_host', set_dest_host))

    def test_a_busy_destination_costs_no_retry(self):
        self.reconfigure(migrate_max_retries=0)
        inst = self.create_instance()
        hosts = self.conductor.worker.scheduler.select_destinations(
            instance_request.numa_request(inst), 'src').hosts
        self._busy_at(hosts[0])
        self.answer_with(True)
        migration = self._migrate(inst)
        self.assertEqual(('queued', hosts[1]),
                         (migration.status, migration.dest_host))
        self.assertEqual({}, migration.refused_hosts)
        self.assertEqual((), self.conductor.cache.get(hosts[0]).reservations)

    def test_every_destination_busy_puts_it_back_in_the_queue(self):
        inst = self.create_instance()
        self.answer_with(_refusal('first'))
        self._busy_at('dst1', 'dst2', 'dst3')
        exc = self.assertRaises(exception.DestinationsBusy, self._migrate,
                                inst)
        self.assertIn('dst1, dst2, dst3', str(exc))
        migration = self._only_migration(inst)
        self.assertEqual(('accepted', None, None, None),
                         (migration.status, migration.admitted_at,
                          migration.dest_host, migration.error))
        self.assertTrue(migration.waiting)
        self.assertEqual([migration.uuid],
                         queue.admit(self.db, self.conductor.admission, 1))
        self.compute_api.check_can_live_migrate_destination.\
            assert_not_called()

    def test_run_admitted_tells_the_executor_it_went_back(self):
        inst = self.create_instance()
        self._busy_at('dst1', 'dst2', 'dst3')
        migration = self.call('live_migrate_instance', inst.uuid, None)
        queue.admit(self.db, self.conductor.admission, 1)
        self.assertIs(False, self.conductor.run_admitted(migration.uuid))

    def test_requested_destination_is_the_source(self):
        inst = self.create_instance()
        self.assertRaisesMessage(exception.InvalidDestination,
                                 "source host", self._migrate, inst, 'src')
        self.assertEqual([], migrations.get_all(self.db),
                         "a request refused up front records nothing")

    def test_requested_destination_is_down(self):
        self.report('dst1', age_s=120)
        inst = self.create_instance()
        self.assertRaisesMessage(exception.ComputeHostDown, 'dst1 is down',
                                 self._migrate, inst, 'dst1')
        self.compute_api.check_can_live_migrate_destination.\
            assert_not_called()

    def test_source_down(self):
        self.report('src', age_s=120)
        inst = self.create_instance()
        self.assertRaises(exception.ComputeHostDown, self._migrate, inst)

    def test_requested_destination_of_another_hypervisor_type(self):
        self.report('dst1', hypervisor_type='kvm')
        inst = self.create_instance()
        self.assertRaisesMessage(exception.InvalidDestination,
                                 'hypervisor type kvm', self._migrate, inst,
                                 'dst1')

    def test_unknown_destination(self):
        inst = self.create_instance()
        self.assertRaises(exception.HostNotFound, self._migrate, inst,
                          'nowhere')

    def test_old_hosts_refuse_numa_guests(self):
        self.report('dst3', service_version=1)
        inst = self.create_instance()
        exc = self.assertRaises(exception.NUMALiveMigrationUnsupported,
                                self._migrate, inst)
        self.assertIn('dst3', str(exc))
        self.assertIn('enable_numa_live_migration', str(exc))

    def test_old_hosts_with_the_workaround(self):
        self.reconfigure(enable_numa_live_migration_workaround=True)
        self.report('dst3', service_version=1)
        inst = self.create_instance()
        self.answer_with(True)
        self.assertEqual('queued', self._migrate(inst, 'dst1').status)


class ConductorDrivenChecksTest(base.ConductorTestCase):
    """Compute API 1.3: source first, then destinations with its answer;
    the returned claim is recorded with 'queued'."""

    def setUp(self):
        super().setUp()
        self.compute_api.supports_conductor_checks.return_value = True
        self.compute_api.supports_numa_live_migration.return_value = True
        self.compute_api.check_can_live_migrate_source.side_effect = \
            self._source_answer
        self.inst = self.create_instance()

    @staticmethod
    def _source_answer(ctxt, instance, request, timeout=None):
        answer = request.obj_clone()
        answer.src_supports_numa_live_migration = True
        return answer

    def _claiming(self, *refusals):
        """Destinations refuse with ``refusals`` in turn, then claim."""
        pending = list(refusals)

        def check(ctxt, instance, host, migration, limits, timeout=None,
                  source_data=None):
            self.assertTrue(source_data.src_supports_numa_live_migration)
            if pending:
                raise pending.pop(0)
            data = objects.LiveMigrateData(
                instance_uuid=instance.uuid, source_host=instance.host,
                dest_host=host, migration_uuid=migration.uuid,
                src_supports_numa_live_migration=True,
                dst_supports_numa_live_migration=True,
                dst_numa_info=objects.NUMAMigrateInfo(cell_pins={0: {1}}))
            data.migration_context = objects.MigrationContext(
                instance_uuid=instance.uuid, migration_uuid=migration.uuid,
                source_host=instance.host, dest_host=host,
                old_numa_topology=instance.numa_topology,
                new_numa_topology=instance.numa_topology)
            return data
        self.compute_api.check_can_live_migrate_destination.side_effect = \
            check

    def _migrate(self, dest_host=None):
        return self.migrate(self.inst.uuid, dest_host)

    def _held(self):
        held = instances.get(self.db, self.inst.uuid).instance\
            .migration_context
        return held and (held.migration_uuid, held.dest_host)

    def test_source_asked_once_claim_recorded_with_queued(self):
        self._claiming(_refusal('first'))
        migration = self._migrate()
        self.compute_api.check_can_live_migrate_source.assert_called_once()
        self.assertEqual(
            2, self.compute_api.check_can_live_migrate_destination.call_count)
        self.assertEqual('queued', migration.status)
        self.assertEqual((migration.uuid, migration.dest_host), self._held())
        history = [c.status for c in migrations.get(
            self.db, migration.uuid).history]
        self.assertEqual(['accepted', 'queued'], history)
        # The source is not sent the claim: the records hold it.
        cast = self.compute_api.live_migration.call_args[0][3]
        self.assertIsNone(cast.get('migration_context'))
        self.assertIsNotNone(cast.dst_numa_info)

    def test_a_source_that_lost_the_check_is_asked_again(self):
        self._claiming()
        answers = [messaging.MessagingTimeout(), None]

        def source(ctxt, instance, request, timeout=None):
            self.assertEqual(5 // 3, timeout)
            answer = answers.pop(0)
            if answer is not None:
                raise answer
            return self._source_answer(ctxt, instance, request)
        self.compute_api.check_can_live_migrate_source.side_effect = source
        self.assertEqual('queued', self._migrate().status)
        self.assertEqual(
            2, self.compute_api.check_can_live_migrate_source.call_count)

    def test_a_source_that_never_answers_is_named_in_the_error(self):
        self._claiming()
        self.compute_api.check_can_live_migrate_source.side_effect = \
            messaging.MessagingTimeout('Timed out waiting for a reply')
        migration = migrations.create(self.db, cbase.migration(
            self.inst, dest_host=None))
        self.assertEqual([migration.uuid], queue.admit(
            self.db, self.conductor.admission, 1))
        # An expected refusal: no traceback is logged for it.
        self.assertTrue(self.conductor.run_admitted(migration.uuid))
        ended = migrations.get(self.db, migration.uuid)
        self.assertEqual('error', ended.status)
        self.assertIn("Compute host src did not answer check_can_live_"
                      "migrate_source within 5 s ([DEFAULT] rpc_response_"
                      "timeout_migration, asked 4 times)", ended.error)
        self.assertNotIn('Timed out', ended.error)
        self.assertEqual(
            4, self.compute_api.check_can_live_migrate_source.call_count)

    def test_a_claim_the_records_refuse_is_dropped_there(self):
        self._claiming()
        # Another in-progress migration holds a claim on the instance
        # (the queue refuses such a request; an older conductor did not).
        other = migrations.create(self.db, cbase.migration(
            self.inst, dest_host='dst3', admitted_at=self.now))
        instances.set_migration_context(
            self.db, self.inst.uuid, objects.MigrationContext(
                instance_uuid=self.inst.uuid, migration_uuid=other.uuid,
                source_host='src', dest_host='dst3',
                old_numa_topology=self.inst.numa_topology,
                new_numa_topology=self.inst.numa_topology))
        self.reconfigure(migrate_max_retries=0)
        mine = migrations.create(self.db, cbase.migration(
            self.inst, dest_host=None, requested_host='dst2'))
        self.assertEqual([mine.uuid], queue.admit(
            self.db, self.conductor.admission, 1))
        self.assertRaises(exception.NoValidHost,
                          self.conductor.execute_admitted, mine.uuid)
        dropped = self.compute_api.drop_move_claim_at_destination
        self.assertEqual('dst2', dropped.call_args[0][2].dest_host)
        self.assertEqual((other.uuid, 'dst3'), self._held())
        self.compute_api.live_migration.assert_not_called()

    def test_cancelled_before_recording_drops_the_claim_there(self):
        self._claiming()
        real = records.queue_with_claim

        def cancelled_first(conductor, context, detail, **kwargs):
            migrations.set_status(self.db, context.migration_uuid,
                                  'cancelled')
            return real(conductor, context, detail, **kwargs)
        self.patch(records, 'queue_with_claim', cancelled_first)
        # The records refuse the claim of a migration no longer
        # accepted, with the status change; that ends the task.
        self.assertRaises(exception.InvalidStatusTransition, self._migrate,
                          'dst2')
        self.compute_api.drop_move_claim_at_destination.assert_called_once()
        self.assertIsNone(self._held())
        self.compute_api.live_migration.assert_not_called()

    def test_guest_not_on_the_source_ends_it_without_destinations(self):
        self.compute_api.check_can_live_migrate_source.side_effect = \
            exception.MigrationPreCheckError(reason='not running on source')
        self.assertRaises(exception.MigrationPreCheckError, self._migrate)
        self.compute_api.check_can_live_migrate_destination.\
            assert_not_called()
        (migration,) = migrations.get_all(self.db,
                                          instance_uuid=self.inst.uuid)
        self.assertEqual('error', migration.status)


class AbortTest(base.ConductorTestCase):

    def test_abort_queued_cancels_and_releases(self):
        inst = self.create_instance()
        self.answer_with(True)
        migration = self.migrate(inst.uuid)
        result = self.call('migration_abort', migration.uuid)
        self.assertEqual('cancelled', result.status)
        self.assertEqual((), self.conductor.cache.get(
            migration.dest_host).reservations)
        self.compute_api.live_migration_abort.assert_not_called()

    def test_abort_running_asks_the_source(self):
        inst = self.create_instance()
        self.answer_with(True)
        migration = self.migrate(inst.uuid)
        for status in ('preparing', 'running'):
            migrations.set_status(self.db, migration.uuid, status)
        self.compute_api.live_migration_abort.return_value = True
        self.call('migration_abort', migration.uuid)
        self.compute_api.live_migration_abort.assert_called_once()

    def test_abort_finished_is_refused(self):
        inst = self.create_instance()
        self.answer_with(_refusal('a'), _refusal('b'), _refusal('c'))
        self.assertRaises(exception.NoValidHost, self.migrate, inst.uuid)
        (migration,) = migrations.get_all(self.db)
        self.assertRaisesMessage(exception.MigrationNotAbortable,
                                 'is error', self.call, 'migration_abort',
                                 migration.uuid)
        # Before: "... that is accepted, queued, preparing, running can".
        self.assertRaisesMessage(exception.MigrationNotAbortable,
                                 'only a migration that is accepted, queued, '
                                 'preparing or running can be aborted',
                                 self.call, 'migration_abort',
                                 migration.uuid)


class DryRunTest(base.ConductorTestCase):

    def test_answers_without_claiming_or_recording(self):
        inst = self.create_instance()
        answer = self.call('live_migration_dry_run', inst.uuid)
        self.assertIn(answer['dest_host'], ('dst1', 'dst2', 'dst3'))
        self.assertEqual(3, len(answer['candidates']))
        self.assertEqual(2, len(answer['numa_topology'].cpu_pinning))
        # One guest cell: no distance between guest cells.
        self.assertEqual(0, answer['distance']['cost'])
        self.assertIn('distance cost 0', answer['distance']['reason'])
        self.assertEqual([], migrations.get_all(self.db))
        for host in self.HOSTS:
            self.assertEqual((), self.conductor.cache.get(host).reservations)
        self.compute_api.check_can_live_migrate_destination.\
            assert_not_called()

    def test_nothing_fits(self):
        tiny = base.cbase.host_topology(cells=1, cores=1, threads=1)
        for host in ('dst1', 'dst2', 'dst3'):
            self.report(host, topology=tiny)
        inst = self.create_instance()
        answer = self.call('live_migration_dry_run', inst.uuid)
        self.assertIsNone(answer['dest_host'])
        # A cloud this small gets every host's own reason.
        self.assertEqual({'dst1', 'dst2', 'dst3'}, set(answer['refused']))


class CPUFilterTest(ConductorDrivenChecksTest):
    """The guest's CPU, from the source's answer, filters the candidates
    before any is asked; hosts that reported no CPU are not refused
    (the inherited tests run again with a guest CPU told: hosts that
    reported none must behave as before)."""

    GUEST = cpumodel.GuestCPU('host-passthrough', 'Icelake-Server',
                              frozenset({'avx512f', 'pku'}))

    @classmethod
    def _source_answer(cls, ctxt, instance, request, timeout=None):
        answer = request.obj_clone()
        answer.src_supports_numa_live_migration = True
        answer.set_guest_cpu(cls.GUEST)
        return answer

    def _cpus(self, **cpus):
        for host, features in cpus.items():
            self.report(host, cpu=None if features is None else
                        objects.HostCPU(model='Icelake-Server',
                                        features=features))

    def _asked(self):
        return [c[0][2] for c in self.compute_api.
                check_can_live_migrate_destination.call_args_list]

    def test_poorer_hosts_are_refused_with_the_missing_features(self):
        self._cpus(dst1=['avx512f'], dst2=['avx512f'], dst3=None)
        self._claiming()
        migration = self._migrate()
        self.assertEqual(['dst3'], self._asked())
        self.assertEqual('dst3', migration.dest_host)
        for host in ('dst1', 'dst2'):
            self.assertIn("needs features this host's CPU lacks: pku",
                          migration.refused_hosts[host])

    def test_no_host_can_run_it(self):
        self._cpus(dst1=['avx512f'], dst2=[], dst3=['pku'])
        self._claiming()
        exc = self.assertRaises(exception.NoValidHost, self._migrate)
        self.assertIn("no candidate's CPU can run the CPU of instance",
                      str(exc))
        self.assertEqual([], self._asked())
        (migration,) = migrations.get_all(self.db,
                                          instance_uuid=self.inst.uuid)
        self.assertEqual('error', migration.status)
        self.assertIn('dst1: CPU cannot run', migration.error)
        self.assertIn('lacks: avx512f, pku', migration.error)
        self.assertEqual(1, len(migration.error.splitlines()))

    def test_requested_host_is_left_to_its_precheck(self):
        self._cpus(dst1=[], dst2=[], dst3=[])
        self._claiming()
        self.assertEqual('dst1', self._migrate('dst1').dest_host)
