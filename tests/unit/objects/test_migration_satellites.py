"""A migration's satellite records: objects of their own, off Migration.

What a feature records about one migration (what was reclaimed to place
it, where its threads ran, its prediction, how it converged, its
post-copy recovery) is versioned on its own, so that adding to it never
bumps Migration, the object every agent reads.
"""

from oslo_serialization import jsonutils

from numamig import exception
from numamig import objects
from numamig.objects import base as obj_base
from numamig.objects import migration
from numamig.objects import migration_satellites as satellites
from tests import base
from tests.unit.objects import samples


class SatellitesAreNotMigrationFieldsTest(base.TestCase):

    def test_no_field_of_a_satellite_is_on_migration(self):
        self.assertFalse({'memory_reclaim', 'migration_threads'} &
                         set(migration.Migration.fields))
        self.assertFalse(set(satellites.PREDICTION_FIELDS) &
                         set(migration.Migration.fields))
        self.assertFalse(set(satellites.CONVERGENCE_FIELDS +
                             satellites.RECOVERY_FIELDS) &
                         set(migration.Migration.fields))
        for cls in satellites.SATELLITES.values():
            self.assertFalse(
                (set(cls.fields) - {'migration_uuid'}) &
                set(migration.Migration.fields), cls.obj_name())

    def test_not_children_of_migration(self):
        # A child object's bump would bump Migration (obj_relationships):
        # a satellite is read beside it, never inside it.
        self.assertNotIn('MigrationReclaim', repr(migration.Migration.fields))
        self.assertNotIn('MigrationThreads', repr(migration.Migration.fields))

    def test_prediction_bounds(self):
        for name, value, fragment in (
                ('prediction', 'x' * 33, '1 to 32'),
                ('prediction', '', '1 to 32'),
                ('predicted_elapsed_ms', -1, 'predicted_elapsed_ms'),
                ('sampled_dirty_rate', -1, 'sampled_dirty_rate')):
            record = samples.migration_prediction()
            setattr(record, name, value)
            exc = self.assertRaises(exception.ObjectValidationError,
                                    record.validate)
            self.assertIn(fragment, str(exc), name)
        samples.migration_prediction().validate()
        objects.MigrationPrediction(migration_uuid=samples.uuids.migration
                                    ).validate()

    def test_convergence_bounds(self):
        for name, value, fragment in (
                ('policy', 'x' * 65, 'policy name of 65'),
                ('policy', '', 'policy name of 0'),
                ('actions', ['a'] * 41, 'at most 40'),
                ('actions', ['a' * 301], 'at most 300')):
            record = samples.migration_convergence()
            setattr(record, name, value)
            exc = self.assertRaises(exception.ObjectValidationError,
                                    record.validate)
            self.assertIn(fragment, str(exc), name)
        samples.migration_convergence().validate()
        # Nothing chosen or reported yet (a release 1 migration).
        empty = objects.MigrationConvergence(
            migration_uuid=samples.uuids.migration).validate()
        self.assertIsNone(empty.policy)
        self.assertIsNone(empty.actions)

    def test_recovery_history_is_bounded(self):
        from numamig.convergence import recovery
        self.assertEqual(recovery.MAX_EVENTS,
                         satellites.MAX_RECOVERY_EVENTS)
        record = samples.migration_recovery()
        record.events = [{'event': 'resume-failed'}] * 41
        exc = self.assertRaises(exception.ObjectValidationError,
                                record.validate)
        self.assertIn('41 events (at most 40)', str(exc))
        record.events = [{'event': 'resume-failed'}] * 40
        record.validate()
        # The stream never broke in post-copy.
        self.assertIsNone(objects.MigrationRecovery(
            migration_uuid=samples.uuids.migration).validate().events)

    def test_agents_read_convergence_and_recovery_only(self):
        # What the records API answers agents with a migration: a new
        # satellite operators read must not join it unasked.
        self.assertEqual(('convergence', 'recovery'),
                         satellites.AGENT_SATELLITES)
        self.assertLessEqual(set(satellites.AGENT_SATELLITES),
                             set(satellites.SATELLITES))

    def test_every_satellite_is_exported_and_keyed_by_migration(self):
        for name, cls in satellites.SATELLITES.items():
            self.assertIs(cls, getattr(objects, cls.obj_name()), name)
            self.assertIn('migration_uuid', cls.fields, name)


class RoundTripTest(base.TestCase):

    def _through_json(self, obj):
        return obj_base.NumamigObject.obj_from_primitive(jsonutils.loads(
            jsonutils.dumps(obj.obj_to_primitive())))

    def test_reclaim(self):
        back = self._through_json(samples.migration_reclaim())
        self.assertIsInstance(back, satellites.MigrationReclaim)
        self.assertEqual(samples.RECLAIM_ENTRIES, back.entries)
        self.assertEqual(samples.uuids.migration, back.migration_uuid)

    def test_threads(self):
        back = self._through_json(samples.migration_threads())
        self.assertIsInstance(back, satellites.MigrationThreads)
        self.assertEqual(samples.THREADS, back.sides)

    def test_prediction(self):
        back = self._through_json(samples.migration_prediction())
        self.assertIsInstance(back, satellites.MigrationPrediction)
        self.assertEqual(('converges', 9000, 40, 1 << 20),
                         tuple(back.get(n)
                               for n in satellites.PREDICTION_FIELDS))

    def test_convergence(self):
        back = self._through_json(samples.migration_convergence())
        self.assertIsInstance(back, satellites.MigrationConvergence)
        self.assertEqual('nfv', back.policy)
        self.assertEqual(samples.CONVERGENCE_ACTIONS, back.actions)

    def test_recovery(self):
        back = self._through_json(samples.migration_recovery())
        self.assertIsInstance(back, satellites.MigrationRecovery)
        self.assertEqual(samples.RECOVERY_EVENTS, back.events)

    def test_empty_ones(self):
        for cls in satellites.SATELLITES.values():
            empty = cls(migration_uuid=samples.uuids.migration)
            self.assertEqual(empty, self._through_json(empty).validate())


class ThreadsTest(base.TestCase):

    def test_cpu_lists_are_sorted(self):
        record = samples.migration_threads()
        side = dict(samples.THREADS['source'], cpus=[7, 6],
                    threads={'live_migration': [7, 6]})
        record.sides = {'source': side}
        self.assertEqual([6, 7], record.sides['source']['cpus'])
        self.assertEqual([6, 7],
                         record.sides['source']['threads']['live_migration'])

    def test_shape_and_bounds_are_checked(self):
        source = samples.THREADS['source']
        too_many = {f'multifdsend_{i}': [1] for i in range(65)}
        for value, fragment in (
                ({'elsewhere': source}, "side 'elsewhere'"),
                ({'source': dict(source, colour='red')}, 'exactly host'),
                ({'source': dict(source, basis='anywhere')}, 'basis'),
                ({'source': dict(source, cpus=[-1])}, 'CPU ids'),
                ({'source': dict(source, cpus=list(range(1025)))},
                 'at most 1024'),
                ({'source': dict(source, threads=too_many)}, 'at most 64'),
                ({'source': dict(source, threads={'x' * 33: [1]})},
                 '1-32 characters'),
                ({'source': dict(source, connections=0)}, 'connections'),
                ([source], 'must be a dict')):
            record = samples.migration_threads()
            exc = self.assertRaises(ValueError, setattr, record, 'sides',
                                    value)
            self.assertIn(fragment, str(exc))


class ReclaimTest(base.TestCase):

    def test_entries_checked(self):
        for entries, fragment in (
                ([{'outcome': 'kept', 'colour': 'red'}], 'keys must be'),
                ([{'outcome': 'lost'}], 'the outcome one of'),
                ([{'outcome': 'kept'}] * 257, '257 entries')):
            record = samples.migration_reclaim()
            record.entries = entries
            exc = self.assertRaises(exception.ObjectValidationError,
                                    record.validate)
            self.assertIn(fragment, str(exc))

    def test_bound_is_the_one_stated(self):
        record = samples.migration_reclaim()
        record.entries = [{'outcome': 'kept'}] * \
            satellites.MAX_RECLAIM_ENTRIES
        self.assertIs(record, record.validate())
