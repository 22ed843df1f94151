"""Memory change records (release 2) on PostgreSQL, MariaDB, SQLite."""

from numamig.db import memory_changes
from tests.functional.db import base

UUID = '5c0de000-18aa-4bbb-8ccc-000000000001'
REQUEST = {'host': 'h', 'node': 1, 'size_mb': 100, 'exact': False}


class MemoryChangesTestCase(base.ServerDBTestCase):

    def test_a_request_delivered_again_finds_its_record(self):
        row, created = memory_changes.start(self.db, UUID, 'h', REQUEST)
        self.assertEqual((True, 'running', REQUEST, None),
                         (created, row['status'], row['request'],
                          row['result']))
        again, created = memory_changes.start(self.db, UUID, 'h',
                                              dict(REQUEST, size_mb=5))
        self.assertEqual((False, REQUEST), (created, again['request']))
        done = memory_changes.finish(self.db, UUID, memory_changes.DONE,
                                     {'steps': []}, {'released_mb': 64})
        self.assertEqual(('done', {'released_mb': 64}),
                         (done['status'], done['result']))
        self.assertEqual(done, memory_changes.start(self.db, UUID, 'h',
                                                    REQUEST)[0])
        self.assertIsNone(memory_changes.get(
            self.db, '5c0de000-18aa-4bbb-8ccc-000000000002'))

