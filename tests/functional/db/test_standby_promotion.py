"""The PostgreSQL pair fixture, and the database layer across a promotion.

Fast (about 13 s) and always on: a primary with a synchronous streaming
standby of the test's own (tests/fixtures/postgres_pair.py), reached by
the multi-host URL the deployment guide gives. A record committed before
the primary is lost is on the promoted standby; while no host takes
writes the layer says so in one line naming the database; after the
promotion the same Database object writes again. The fault with daemons
and migrations in flight is tests/functional/faults/test_failover.py.
"""

import sqlalchemy as sa

from numamig import exception
from numamig.db import api
from tests import base
from tests.fixtures import postgres_pair


class StandbyPromotionTest(base.TestCase):

    def setUp(self):
        super().setUp()
        reason = postgres_pair.missing_requirements()
        if reason:
            # tools/dev.sh installs what this needs: a missing part is a
            # broken install, not an opt-in.
            self.fail(reason)
        self.pair = self.useFixture(postgres_pair.PostgresPair())
        self.db = api.Database(self.pair.url)
        self.addCleanup(self.db.dispose)
        self.db.sync()

    def _write(self, name):
        with self.db.writer() as session:
            session.execute(sa.text(
                'CREATE TABLE IF NOT EXISTS t (name text)'))
            session.execute(sa.text('INSERT INTO t VALUES (:n)'),
                            {'n': name})
            return session.execute(sa.text(
                'SELECT inet_server_port()')).scalar()

    def _names(self):
        with self.db.reader() as session:
            return sorted(session.execute(sa.text(
                'SELECT name FROM t')).scalars())

    def test_a_promoted_standby_has_every_commit_and_takes_writes(self):
        self.assertEqual(self.pair.primary.port, self._write('before'))
        self.assertFalse(self.pair.in_recovery(self.pair.primary))
        self.assertTrue(self.pair.in_recovery(self.pair.standby))
        self.pair.lose_primary()
        # Only a standby answers: no host takes writes.
        error = self.assertRaises(exception.DatabaseError, self._write, 'x')
        self.assertNotIn('\n', str(error))
        self.assertIn('Database postgresql', str(error))
        self.pair.promote()
        self.assertEqual(self.pair.standby.port, self._write('after'))
        self.assertEqual(['after', 'before'], self._names())
        self.db.check_schema()

    def test_a_rebuilt_standby_lets_it_fail_over_back(self):
        self._write('first')
        self.pair.lose_primary()
        self.pair.promote()
        self._write('second')
        self.pair.rebuild_standby()
        self.pair.lose_primary()
        self.pair.promote()
        self.assertEqual(self.pair.standby.port, self._write('third'))
        self.assertEqual(['first', 'second', 'third'], self._names())
