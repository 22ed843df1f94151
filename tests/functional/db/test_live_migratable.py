"""Standing live-migratable answers on PostgreSQL, MariaDB and SQLite."""

from numamig.db import live_migratable
from numamig.scheduler import migratable
from tests.functional.db import base

UUID1 = '5c0de000-18aa-4bbb-8ccc-000000000001'
UUID2 = '5c0de000-18aa-4bbb-8ccc-000000000002'
NO = migratable.Status(migratable.NO, (migratable.Reason(
    migratable.NO_HOST_FITS, 'closest: h1: too few pCPUs'),))
YES = migratable.Status(migratable.YES, (), 'h2')


class LiveMigratableTestCase(base.ServerDBTestCase):

    def test_saved_read_counted_and_forgotten(self):
        live_migratable.save(self.db, [(UUID1, YES), (UUID2, NO)])
        rows = live_migratable.get_many(self.db, [UUID1, UUID2, 'x'])
        self.assertEqual({UUID1: ('yes', [], 'h2'),
                          UUID2: ('no', [{'kind': 'no-host-fits',
                                          'detail': 'closest: h1: too few '
                                                    'pCPUs'}], None)},
                         {u: (r['status'], r['reasons'], r['witness'])
                          for u, r in rows.items()})
        self.assertEqual({('yes', ''): 1, ('no', 'no-host-fits'): 1},
                         live_migratable.counts(self.db))
        live_migratable.forget(self.db, UUID2)
        self.assertEqual({('yes', ''): 1}, live_migratable.counts(self.db))

    def test_changed_at_moves_only_with_the_status(self):
        live_migratable.save(self.db, [(UUID1, YES)])
        first = live_migratable.get_many(self.db, [UUID1])[UUID1]
        live_migratable.save(self.db, [(UUID1, migratable.Status(
            migratable.YES, (), 'h3'))])
        again = live_migratable.get_many(self.db, [UUID1])[UUID1]
        self.assertEqual((first['changed_at'], 'h3'),
                         (again['changed_at'], again['witness']))
        self.assertGreaterEqual(again['checked_at'], first['checked_at'])
        live_migratable.save(self.db, [(UUID1, NO)])
        changed = live_migratable.get_many(self.db, [UUID1])[UUID1]
        self.assertGreater(changed['changed_at'], first['changed_at'])

    def test_many_guests_read_in_chunks(self):
        uuids = [f'5c0de000-18aa-4bbb-8ccc-{n:012d}' for n in range(1200)]
        live_migratable.save(self.db, [(u, YES) for u in uuids])
        self.assertEqual(set(uuids),
                         set(live_migratable.get_many(self.db, uuids)))
