"""The names a read words migrations by (manage_commands/_names.py) are
the versioned objects' own."""

from numamig.cmd.manage_commands import _names
from numamig.objects import fields
from numamig.objects import migration
from numamig.objects import migration_satellites
from numamig.objects import migration_threads
from tests import base


class NamesTestCase(base.TestCase):

    def test_statuses_are_the_enums(self):
        ours, theirs = _names.MigrationStatus, fields.MigrationStatus
        for name in ('ACCEPTED', 'QUEUED', 'COMPLETED', 'FAILED',
                     'CANCELLED', 'ALL', 'HALTED', 'SETTLED',
                     'UNSUCCESSFUL'):
            self.assertEqual(getattr(theirs, name), getattr(ours, name),
                             name)

    def test_fields_and_keys_are_the_objects(self):
        self.assertEqual(migration.RESULT_FIELDS, _names.RESULT_FIELDS)
        self.assertEqual(migration_satellites.MEMORY_RECLAIM_KEYS,
                         _names.MEMORY_RECLAIM_KEYS)
        self.assertEqual(tuple(migration_satellites.SATELLITES),
                         _names.SATELLITES)
        self.assertEqual(migration_satellites.PREDICTION_FIELDS,
                         _names.PREDICTION_FIELDS)
        self.assertEqual(migration_threads.SIDES, _names.THREAD_SIDES)
