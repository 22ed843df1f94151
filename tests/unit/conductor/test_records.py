"""Tests of numamig.conductor.records: the rules around move claims."""

import contextlib
import datetime
from unittest import mock

import fixtures
import sqlalchemy as sa

from numamig import exception
from numamig import fingerprint
from numamig import objects
from numamig.conductor import records
from numamig.db import compute_nodes
from numamig.db import instances
from numamig.db import migration_claims
from numamig.db import migrations
from numamig.db import models
from numamig.db import queue
from tests.unit.compute import base as cbase
from tests.unit.conductor import base


class MigrationContextRulesTest(base.ConductorTestCase):

    def setUp(self):
        super().setUp()
        self.inst = self.create_instance()
        self.migration = migrations.create(self.db, cbase.migration(
            self.inst, dest_host='dst1'))

    def _context(self, migration, dest_host='dst1'):
        return objects.MigrationContext(
            instance_uuid=self.inst.uuid, migration_uuid=migration.uuid,
            source_host='src', dest_host=dest_host,
            old_numa_topology=self.inst.numa_topology,
            new_numa_topology=self.inst.numa_topology)

    def _held(self):
        held = instances.get(self.db, self.inst.uuid).instance\
            .migration_context
        return held and held.migration_uuid

    def test_records_the_claim_of_the_destination_being_tried(self):
        records.set_migration_context(self.worker,
                                      self._context(self.migration))
        self.assertEqual(self.migration.uuid, self._held())

    def test_refuses_a_destination_the_migration_moved_away_from(self):
        migrations.set_dest_host(self.db, self.migration.uuid, 'dst2')
        self.assertRaisesMessage(
            exception.MigrationPreCheckError, 'was not recorded',
            records.set_migration_context, self.worker,
            self._context(self.migration, dest_host='dst1'))
        self.assertIsNone(self._held())

    def test_refuses_while_another_migration_holds_a_claim(self):
        records.set_migration_context(self.worker,
                                      self._context(self.migration))
        other = migrations.create(self.db, cbase.migration(
            self.inst, dest_host='dst1'))
        self.assertRaisesMessage(
            exception.MigrationPreCheckError, 'already being migrated',
            records.set_migration_context, self.worker,
            self._context(other))
        self.assertEqual(self.migration.uuid, self._held())

    def test_heals_a_claim_left_by_an_ended_migration(self):
        records.set_migration_context(self.worker,
                                      self._context(self.migration))
        # An ended migration whose claim was never dropped.
        migrations.set_status(self.db, self.migration.uuid, 'error')
        other = migrations.create(self.db, cbase.migration(
            self.inst, dest_host='dst1'))
        records.set_migration_context(self.worker, self._context(other))
        self.assertEqual(other.uuid, self._held())

    def test_ending_badly_drops_the_claim_and_the_reservation(self):
        records.set_migration_context(self.worker,
                                      self._context(self.migration))
        self.conductor.cache.reserve('dst1', self.inst.uuid, 'demo',
                                     self.inst.numa_topology)
        records.set_status(self.worker, self.migration.uuid, 'error')
        self.assertIsNone(self._held())
        self.assertEqual((), self.conductor.cache.get('dst1').reservations)

    def test_agents_may_update_only_power_and_task_state(self):
        self.assertRaisesMessage(
            exception.Invalid, "not ['host']", records.update_instance,
            self.worker, self.inst.uuid, {'host': 'elsewhere'})
        updated = records.update_instance(self.worker, self.inst.uuid,
                                          {'power_state': 'shutdown'})
        self.assertEqual('shutdown', updated.power_state)


class DropClaimAtTest(MigrationContextRulesTest):
    """Giving up on a destination drops its claim there, and only there."""

    def test_drops_the_claim_held_on_that_host_and_asks_the_agent(self):
        records.set_migration_context(self.worker,
                                      self._context(self.migration))
        records.drop_claim_at(self.worker, None, self.migration, 'dst1')
        self.assertIsNone(self._held())
        call = self.compute_api.drop_move_claim_at_destination.call_args
        self.assertEqual(('dst1', self.migration.uuid, 5),
                         (call[0][2].dest_host, call[0][2].uuid,
                          call[1]['timeout']))

    def test_keeps_the_claim_the_migration_took_on_another_host(self):
        migrations.set_dest_host(self.db, self.migration.uuid, 'dst2')
        records.set_migration_context(
            self.worker, self._context(self.migration, dest_host='dst2'))
        records.drop_claim_at(self.worker, None, self.migration, 'dst1')
        self.assertEqual(self.migration.uuid, self._held())

    def test_an_unreachable_agent_is_not_an_error(self):
        self.compute_api.drop_move_claim_at_destination.side_effect = \
            RuntimeError('down')
        records.set_migration_context(self.worker,
                                      self._context(self.migration))
        records.drop_claim_at(self.worker, None, self.migration, 'dst1')
        self.assertIsNone(self._held())


class StalledMigrationsTest(MigrationContextRulesTest):

    def setUp(self):
        super().setUp()
        # Taken from the queue by a worker that then died.
        self.assertEqual([self.migration.uuid], queue.admit(
            self.db, self.conductor.admission, 1))

    def _later(self, seconds):
        import datetime
        return self.now + datetime.timedelta(seconds=seconds)

    def test_a_migration_waiting_in_the_queue_is_left_alone(self):
        other = self.create_instance()
        waiting = migrations.create(self.db, cbase.migration(other),
                                    max_queued=10)
        ended = records.end_stalled_migrations(self.worker, None,
                                               self._later(3600))
        self.assertEqual([self.migration.uuid], [m.uuid for m in ended])
        self.assertEqual('accepted',
                         migrations.get(self.db, waiting.uuid).status)

    def test_accepted_too_long_ends_error_and_drops_the_claim(self):
        records.set_migration_context(self.worker,
                                      self._context(self.migration))
        patience = 5 * (3 + 2)
        self.assertEqual([], records.end_stalled_migrations(
            self.worker, None, self._later(patience - 5)))
        (ended,) = records.end_stalled_migrations(
            self.worker, None, self._later(patience + 5))
        self.assertEqual('error', ended.status)
        self.assertIn('conductor worker stopped', ended.error)
        self.assertIsNone(self._held())
        self.compute_api.drop_move_claim_at_destination.assert_called_once()

    def test_queued_too_long_ends_failed(self):
        records.set_migration_context(self.worker,
                                      self._context(self.migration))
        migrations.set_status(self.db, self.migration.uuid, 'queued')
        (ended,) = records.end_stalled_migrations(
            self.worker, None, self._later(11))
        self.assertEqual('failed', ended.status)
        self.assertIn('did not start it within', ended.error)
        self.assertIsNone(self._held())

    def test_a_migration_the_source_took_over_is_left_alone(self):
        migrations.set_status(self.db, self.migration.uuid, 'queued')
        migrations.set_status(self.db, self.migration.uuid, 'preparing')
        self.assertEqual([], records.end_stalled_migrations(
            self.worker, None, self._later(3600)))


class LeasedStalledMigrationsTest(MigrationContextRulesTest):
    """A worker holds what it admitted by a lease, not by patience."""

    def setUp(self):
        super().setUp()
        self.assertEqual([self.migration.uuid], queue.admit(
            self.db, self.conductor.admission, 1, lease_s=15))

    def _later(self, seconds):
        import datetime
        return self.now + datetime.timedelta(seconds=seconds)

    def test_a_lapsed_lease_ends_it_long_before_the_patience(self):
        records.set_migration_context(self.worker,
                                      self._context(self.migration))
        self.assertEqual([], records.end_stalled_migrations(
            self.worker, None, self._later(10)))
        (ended,) = records.end_stalled_migrations(
            self.worker, None, self._later(20), lease_s=15)
        self.assertEqual('error', ended.status)
        self.assertIn('conductor worker stopped', ended.error)
        # What was judged, so that the reason is true.
        self.assertIn('renewed its lease on the migration for none of the '
                      'last 15 s while the database answered', ended.error)
        self.assertIsNone(self._held())
        self.compute_api.drop_move_claim_at_destination.assert_called_once()

    def test_the_reason_names_the_holder_and_who_ended_it(self):
        # The records say which conductor drove the migration and which
        # one took over once its lease ran out.
        self.db_holder('cond-a:12')
        (ended,) = records.end_stalled_migrations(
            self.worker, None, self._later(20), lease_s=15, by='cond-b:7')
        self.assertIn('its conductor worker cond-a:12 stopped or was cut '
                      'off', ended.error)
        self.assertIn('(ended by cond-b:7)', ended.error)

    def db_holder(self, holder):
        with self.db.writer() as session:
            session.execute(sa.update(models.Migration).where(
                models.Migration.uuid == self.migration.uuid).values(
                    lease_holder=holder))

    def test_leases_not_trusted_yet_end_nothing(self):
        self.assertEqual([], records.end_stalled_migrations(
            self.worker, None, self._later(3600), trust_leases=False))
        self.assertEqual('accepted',
                         migrations.get(self.db, self.migration.uuid).status)

    def test_what_this_worker_holds_is_never_stalled(self):
        self.assertEqual([], records.end_stalled_migrations(
            self.worker, None, self._later(3600),
            held={self.migration.uuid}))


class RecordedTogetherTest(MigrationContextRulesTest):
    """Claim + queued, and completed + applied claim: one transaction."""

    def test_queue_with_claim_records_both(self):
        migration = records.queue_with_claim(
            self.worker, self._context(self.migration), detail='claimed')
        self.assertEqual('queued', migration.status)
        self.assertEqual(self.migration.uuid, self._held())

    def test_neither_is_recorded_when_the_status_may_not_change(self):
        # Straight to the repository: the records' rules would refuse
        # earlier; the transaction must hold on its own.
        migrations.set_status(self.db, self.migration.uuid, 'cancelled')
        self.assertRaises(
            exception.InvalidStatusTransition,
            migration_claims.queue_with_claim, self.db,
            self._context(self.migration), None, 'claimed')
        self.assertIsNone(self._held())

    def test_queue_with_claim_follows_the_claim_rules(self):
        migrations.set_dest_host(self.db, self.migration.uuid, 'dst2')
        self.assertRaisesMessage(
            exception.MigrationPreCheckError, 'was not recorded',
            records.queue_with_claim, self.worker,
            self._context(self.migration, dest_host='dst1'), 'claimed')
        self.assertEqual('accepted', migrations.get(
            self.db, self.migration.uuid).status)

    def test_the_common_case_reads_nothing_before_writing(self):
        rules = mock.Mock(side_effect=AssertionError('rules read'))
        self.patch(records, '_claim_replaces', rules)
        migration = records.queue_with_claim(
            self.worker, self._context(self.migration), detail='claimed')
        self.assertEqual(('queued', self.migration.uuid),
                         (migration.status, self._held()))
        rules.assert_not_called()

    def test_a_claim_the_caller_did_not_see_goes_by_the_rules(self):
        records.set_migration_context(self.worker,
                                      self._context(self.migration))
        migrations.set_status(self.db, self.migration.uuid, 'error')
        other = migrations.create(self.db, cbase.migration(
            self.inst, dest_host='dst1'))
        # The caller read the instance before the leaked claim was
        # recorded: the write expecting none fails, the rules heal it.
        migration = records.queue_with_claim(
            self.worker, self._context(other), detail='claimed', held=None)
        self.assertEqual(('queued', other.uuid),
                         (migration.status, self._held()))

    def _running(self):
        records.queue_with_claim(self.worker,
                                 self._context(self.migration), 'claimed')
        migrations.set_status(self.db, self.migration.uuid, 'running')

    def test_complete_applies_the_claim_with_the_result(self):
        self._running()
        migration = records.complete(
            self.worker, self.migration.uuid,
            result={'emulated': True, 'elapsed_ms': 12})
        self.assertEqual(('completed', 12, True),
                         (migration.status, migration.elapsed_ms,
                          migration.emulated))
        record = instances.get(self.db, self.inst.uuid).instance
        self.assertEqual('dst1', record.host)
        self.assertIsNone(record.migration_context)

    def test_complete_releases_the_guests_placement_on_the_source(self):
        # Reserved when the guest came to the source; no report there
        # counted it before it left.
        self.conductor.cache.reserve('src', self.inst.uuid, 'demo',
                                     self.inst.numa_topology)
        self.conductor.cache.reserve('dst1', self.inst.uuid, 'demo',
                                     self.inst.numa_topology)
        self._running()
        records.complete(self.worker, self.migration.uuid)
        self.assertEqual((), self.conductor.cache.get('src').reservations)
        # The destination's stays until a report there counts the guest.
        self.assertEqual([self.inst.uuid], [
            r.instance_uuid
            for r in self.conductor.cache.get('dst1').reservations])

    def test_complete_twice_is_completed_once(self):
        self._running()
        records.complete(self.worker, self.migration.uuid)
        again = records.complete(self.worker, self.migration.uuid)
        self.assertEqual('completed', again.status)
        history = migrations.get(self.db, again.uuid).history
        self.assertEqual(1, [c.status for c in history].count('completed'))

    def test_an_end_frees_a_slot_once(self):
        # The executor admits the next waiting migration when one ends;
        # a completion it is not told of holds the queue until recheck.
        self._running()
        ended = mock.Mock()
        self.reconfigure(migration_ended=ended)
        done = records.complete(self.worker, self.migration.uuid)
        records.complete(self.worker, self.migration.uuid)
        ended.assert_called_once_with(done)

    def test_a_failure_frees_a_slot(self):
        self._running()
        ended = mock.Mock()
        self.reconfigure(migration_ended=ended)
        failed = records.set_status(self.worker, self.migration.uuid,
                                    'failed', error='copy broke')
        ended.assert_called_once_with(failed)

    def test_listeners_hear_each_end(self):
        heard = []
        self.conductor.add_end_listener(heard.append)
        self._running()
        records.complete(self.worker, self.migration.uuid)
        records.complete(self.worker, self.migration.uuid)
        self.assertEqual([(self.migration.uuid, 'completed')],
                         [(m.uuid, m.status) for m in heard])

    def test_complete_refused_applies_nothing(self):
        records.queue_with_claim(self.worker,
                                 self._context(self.migration), 'claimed')
        self.assertRaises(exception.InvalidStatusTransition,
                          records.complete, self.worker,
                          self.migration.uuid)
        record = instances.get(self.db, self.inst.uuid).instance
        self.assertEqual('src', record.host)
        self.assertEqual(self.migration.uuid, self._held())

    def test_complete_without_a_claim_only_changes_status(self):
        migrations.set_status(self.db, self.migration.uuid, 'queued')
        migrations.set_status(self.db, self.migration.uuid, 'running')
        migration = records.complete(self.worker, self.migration.uuid)
        self.assertEqual('completed', migration.status)
        self.assertEqual(
            'src', instances.get(self.db, self.inst.uuid).instance.host)


class SyncReportsTest(base.ConductorTestCase):
    """A worker reads only what other workers stored since it looked."""

    def test_reads_only_the_reports_stored_since(self):
        records.sync_reports(self.worker)
        seen = self.worker.reports.seen
        # Another worker stores dst1's newer report.
        later = self.now + datetime.timedelta(seconds=30)
        newer = objects.ComputeNodeReport(**{
            name: getattr(self.conductor.cache.get('dst1').report, name)
            for name in ('host', 'hypervisor_uri', 'hypervisor_type',
                         'topology', 'service_version', 'fingerprint')},
            reported_at=later)
        # Saying something new (a guest came): built whole.
        newer.fingerprint = fingerprint.compute([('p', 'arrived')])
        compute_nodes.save_report(self.db, newer)
        with mock.patch.object(self.worker.reports.builder, 'build',
                               wraps=self.worker.reports.builder.build) \
                as load:
            records.sync_reports(self.worker)
            records.sync_reports(self.worker)
        self.assertEqual(1, load.call_count, "only dst1's, once")
        # Built straight from its JSON, not through OVO.
        self.assertEqual(0, self.worker.reports.builder.fallen_back)
        self.assertEqual(newer.topology,
                         self.conductor.cache.get('dst1').report.topology)
        self.assertEqual(later, self.conductor.cache.get(
            'dst1').report.reported_at)
        self.assertGreater(self.worker.reports.seen, seen)

    def report_of(self, host, at, **changes):
        values = {name: getattr(self.conductor.cache.get(host).report, name)
                  for name in ('host', 'hypervisor_uri', 'hypervisor_type',
                               'topology', 'service_version', 'fingerprint')}
        values.update(changes)
        return objects.ComputeNodeReport(**values, reported_at=at)

    def test_a_report_that_says_the_same_is_not_built_again(self):
        first = self.now + datetime.timedelta(seconds=30)
        compute_nodes.save_report(self.db, self.report_of('dst1', first))
        records.sync_reports(self.worker)
        # Stored by another worker: the same content, a minute later.
        later = first + datetime.timedelta(seconds=60)
        compute_nodes.save_report(self.db, self.report_of('dst1', later))
        with mock.patch.object(self.worker.reports.builder, 'build',
                               wraps=self.worker.reports.builder.build) \
                as load:
            records.sync_reports(self.worker)
        self.assertEqual(0, load.call_count)
        cached = self.conductor.cache.get('dst1')
        self.assertEqual(later, cached.report.reported_at)
        self.assertEqual(later, cached.received_at)
        # What it says changed: built whole.
        moved = later + datetime.timedelta(seconds=60)
        topology = cached.report.topology.obj_clone()
        topology.cells[0].pinned_cpus = set()
        topology.cells[0].cpu_usage = 0
        compute_nodes.save_report(self.db, self.report_of(
            'dst1', moved, topology=topology))
        with mock.patch.object(self.worker.reports.builder, 'build',
                               wraps=self.worker.reports.builder.build) \
                as load:
            records.sync_reports(self.worker)
        self.assertEqual(1, load.call_count)
        self.assertEqual(moved, self.conductor.cache.get(
            'dst1').report.reported_at)

    def test_a_report_of_the_same_second_stored_later_is_taken(self):
        # Reports carry whole seconds: two of one host in one second,
        # the later stored by another worker, must not leave this
        # worker's scheduler with the earlier one.
        self.report('dst1')
        records.sync_reports(self.worker)
        cached = self.conductor.cache.get('dst1').report
        later = objects.ComputeNodeReport(**{
            name: getattr(cached, name)
            for name in ('host', 'hypervisor_uri', 'hypervisor_type',
                         'topology', 'fingerprint', 'reported_at')},
            service_version=cached.service_version + 1)
        compute_nodes.save_report(self.db, later)
        records.sync_reports(self.worker)
        self.assertEqual(cached.service_version + 1, self.conductor.cache.get(
            'dst1').report.service_version)
        with mock.patch.object(compute_nodes, '_to_object',
                               wraps=compute_nodes._to_object) as load:
            records.sync_reports(self.worker)
        load.assert_not_called()

    def test_own_reports_are_not_read_again(self):
        records.sync_reports(self.worker)
        self.report('dst2')
        with mock.patch.object(compute_nodes, '_to_object',
                               wraps=compute_nodes._to_object) as load:
            records.sync_reports(self.worker)
        load.assert_not_called()


class ReportsBuiltAfterTheTransactionTest(base.ConductorTestCase):
    """Building reports is CPU work: it runs after the transaction that
    read them ended, so that the session never sits idle inside it (a
    PostgreSQL server ends such a session after [database]
    idle_in_transaction_timeout)."""

    def setUp(self):
        super().setUp()
        self.instance = self.create_instance()

    def newer_dst1(self):
        cached = self.conductor.cache.get('dst1').report
        later = self.now + datetime.timedelta(seconds=30)
        report = objects.ComputeNodeReport(**{
            name: getattr(cached, name)
            for name in ('host', 'hypervisor_uri', 'hypervisor_type',
                         'topology', 'service_version')},
            fingerprint=fingerprint.compute([('p', 'arrived')]),
            reported_at=later)
        compute_nodes.save_report(self.db, report)
        return later

    def test_no_transaction_is_open_while_reports_are_built(self):
        records.sync_reports(self.worker)
        later = self.newer_dst1()
        open_while_building = []
        real_reader = self.worker.db.reader
        depth = [0]

        @contextlib.contextmanager
        def counted_reader():
            with real_reader() as session:
                depth[0] += 1
                try:
                    yield session
                finally:
                    depth[0] -= 1
        build = self.worker.reports.builder.build

        def spy(change):
            open_while_building.append(depth[0])
            return build(change)
        with mock.patch.object(self.worker.db, 'reader', counted_reader), \
                mock.patch.object(self.worker.reports.builder, 'build',
                                  side_effect=spy):
            for read in (lambda: records.sync_reports(self.worker),
                         lambda: records.read_instance(
                             self.worker, self.instance.uuid, True)):
                compute_nodes.save_report(self.db, objects.ComputeNodeReport(
                    **{name: getattr(self.conductor.cache.get(
                        'dst1').report, name)
                       for name in ('host', 'hypervisor_uri',
                                    'hypervisor_type', 'topology',
                                    'service_version')},
                    fingerprint=fingerprint.compute(
                        [('p', str(len(open_while_building)))]),
                    reported_at=later + datetime.timedelta(
                        seconds=10 * (1 + len(open_while_building)))))
                read()
        self.assertEqual([0, 0], open_while_building)

    def test_a_transaction_that_fails_after_reading_loses_no_report(self):
        records.sync_reports(self.worker)
        seen = self.worker.reports.seen
        later = self.newer_dst1()
        with mock.patch.object(compute_nodes, 'maintenance_in',
                               side_effect=RuntimeError('connection lost')):
            self.assertRaises(RuntimeError, records.read_instance,
                              self.worker, self.instance.uuid, True)
        self.assertEqual(seen, self.worker.reports.seen)
        records.sync_reports(self.worker)
        self.assertEqual(later, self.conductor.cache.get(
            'dst1').report.reported_at)


class ReadAdmittedTest(base.ConductorTestCase):
    """What a migration thread reads first comes from one transaction
    and says the same as the reads it replaced."""

    def setUp(self):
        super().setUp()
        self.inst = self.create_instance()
        self.migration = migrations.create(self.db, cbase.migration(
            self.inst, status='accepted'), max_queued=10)
        self.began = []
        self.patch_begin()

    def patch_begin(self):
        reader, writer = self.db.reader, self.db.writer

        def counted(opener):
            def open_(*args, **kwargs):
                self.began.append(opener.__name__)
                return opener(*args, **kwargs)
            return open_
        self.patch(self.db, 'reader', counted(reader))
        self.patch(self.db, 'writer', counted(writer))

    def test_one_transaction_reads_what_the_task_chooses_with(self):
        compute_nodes.set_disabled(self.db, 'dst2', 'firmware')
        del self.began[:]
        read = records.read_admitted(self.worker, self.migration.uuid)
        self.assertEqual(['reader'], self.began)
        self.assertEqual(self.migration.uuid, read.migration.uuid)
        self.assertEqual(self.inst.uuid, read.instance.uuid)
        self.assertEqual(queue.busy_destinations(
            self.db, self.worker.settings.admission.per_dest), set(read.busy))
        self.assertEqual({'dst2'}, set(read.maintenance))

    def test_a_cancelled_migration_reads_nothing_more(self):
        migrations.set_status(self.db, self.migration.uuid, 'cancelled')
        read = records.read_admitted(self.worker, self.migration.uuid)
        self.assertEqual('cancelled', read.migration.status)
        self.assertIsNone(read.instance)

    def test_reports_stored_by_another_worker_reach_the_cache(self):
        newer = self.now + datetime.timedelta(seconds=5)
        report = compute_nodes.get(self.db, 'dst3')
        report.reported_at = newer
        compute_nodes.save_report(self.db, report)     # another worker
        records.read_admitted(self.worker, self.migration.uuid)
        self.assertEqual(newer,
                         self.worker.cache.get('dst3').report.reported_at)

    def test_read_instance_reads_maintenance_only_when_asked(self):
        compute_nodes.set_disabled(self.db, 'dst1', None)
        del self.began[:]
        instance, disabled = records.read_instance(self.worker,
                                                   self.inst.uuid)
        self.assertEqual((self.inst.uuid, None), (instance.uuid, disabled))
        _, disabled = records.read_instance(self.worker, self.inst.uuid,
                                            with_maintenance=True)
        self.assertEqual({'dst1'}, set(disabled))
        self.assertEqual(['reader', 'reader'], self.began)


class ReportWritersTest(base.ConductorTestCase):
    """A burst of reports is written in batches by at most
    ``report_writers`` threads at once; every request is answered."""

    def setUp(self):
        super().setUp()
        import threading
        self.lock = threading.Lock()
        self.at_once, self.most, self.batches = 0, 0, []
        self.release = threading.Event()
        self.useFixture(fixtures.MockPatchObject(
            compute_nodes, 'save_reports_reading_guests',
            side_effect=self._write))

    def _write(self, db, reports):
        with self.lock:
            self.at_once += 1
            self.most = max(self.most, self.at_once)
        self.release.wait(5)
        with self.lock:
            self.at_once -= 1
            self.batches.append([r.host for r in reports])
        return [compute_nodes.SavedReport(r, [], None) for r in reports]

    def _worker(self, writers):
        from numamig.conductor import worker as worker_mod
        return mock.Mock(reports=worker_mod.ReportCursor(writers))

    def _report(self, host, second=0):
        return mock.Mock(host=host, reported_at=datetime.datetime(
            2026, 11, 28, 12, 0, second, tzinfo=datetime.UTC))

    def _burst(self, worker, reports):
        """Save ``reports`` from a thread each; the first is being
        written (and holds the writers' slot it took) before the others
        start."""
        import threading
        import time
        errors = []

        def save(report):
            try:
                records.save_report(worker, report)
            except Exception as error:  # noqa: BLE001 - collected
                errors.append(error)
        threads = [threading.Thread(target=save, args=(r,))
                   for r in reports]
        threads[0].start()
        deadline = time.monotonic() + 5
        while self.at_once == 0 and time.monotonic() < deadline:
            time.sleep(0.01)
        for thread in threads[1:]:
            thread.start()
        # Every thread has the chance to go past the bound first.
        threading.Event().wait(0.3)
        self.release.set()
        for thread in threads:
            thread.join(10)
        self.assertFalse(any(t.is_alive() for t in threads))
        return errors

    def test_at_most_n_writers_and_batches_take_what_waits(self):
        worker = self._worker(2)
        errors = self._burst(worker, [self._report(f'h{i}')
                                      for i in range(20)])
        self.assertEqual([], errors)
        self.assertEqual(2, self.most)
        written = [host for batch in self.batches for host in batch]
        self.assertEqual(sorted(f'h{i}' for i in range(20)),
                         sorted(written))
        # The first writer took its own report, the second what waited
        # when it came; the rest, handed over while both wrote, went in
        # a transaction or two: 20 reports, at most 4 transactions.
        self.assertLessEqual(len(self.batches), 4)
        self.assertEqual(0, worker.reports.writers)
        self.assertEqual({}, worker.reports.pending)

    def test_only_a_hosts_newest_waiting_report_is_written(self):
        worker = self._worker(1)
        reports = [self._report('busy')] + [
            self._report('h', second) for second in (3, 1, 2)]
        errors = self._burst(worker, reports)
        self.assertEqual([], errors)
        written = [r for call in compute_nodes.save_reports_reading_guests
                   .call_args_list for r in call.args[1]]
        self.assertEqual(1, sum(1 for r in written if r.host == 'h'))
        self.assertIn(reports[1], written)

    def test_a_failed_batch_answers_each_of_its_requests(self):
        compute_nodes.save_reports_reading_guests.side_effect = \
            exception.DatabaseError(url='db', reason='gone')
        errors = self._burst(self._worker(2), [self._report(f'h{i}')
                                               for i in range(5)])
        self.assertEqual(5, len(errors))
        self.assertTrue(all(isinstance(e, exception.DatabaseError)
                            for e in errors))
