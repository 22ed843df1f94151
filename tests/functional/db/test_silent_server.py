"""A PostgreSQL server gone silent mid-transaction: how long a call waits.

The server's side of tests/functional/db/test_silent_primary.py (there
the client is in the namespace, here the server): the SQLAlchemy path
in-process, and the same Database serving again once the link is back.

The server is the test's own (tests/fixtures/postgres_pair.py
PostgresInNamespace), run in a network namespace of the test's own
(tests/fixtures/netns.py) and reached over its veth link. A numamig
Database opens a transaction, runs a first query, then the namespace's
end of the link is taken down: the server's host gone, nothing reset,
every packet lost. The next query of the transaction:

* with libpq's bounds (numamig.db.libpq: here ``tcp_user_timeout``
  3000 ms, keepalives of 1 s) fails with a one-line DatabaseError
  within the bound (asserted under 15 s; measured ~3 s);
* with no bounds, it has not returned after twice the bound:
  the kernel retransmits for ~15 minutes. The link is then brought back
  and the query finishes, so nothing is left hanging.

About 20 s; always on (root and iproute2, as the fault tests).
"""

import threading
import time

import sqlalchemy as sa

from numamig import exception
from numamig.db import api
from tests import base
from tests.fixtures import netns
from tests.fixtures import postgres_pair

BOUND_MS = 3000
# Far above the bound, far below the kernel's ~15 min of retransmission.
ERROR_WITHIN_S = 15
# After a restored link the kernel's next retransmission (its back-off
# doubles from 200 ms: one at ~12.6 s after the cut) carries the query.
RESUME_WITHIN_S = 60


class SilentServerTest(base.TestCase):

    def setUp(self):
        super().setUp()
        for reason in (netns.missing_requirements(),
                       postgres_pair.missing_requirements()):
            if reason:
                # tools/dev.sh installs both: a broken install, not an
                # opt-in.
                self.fail(reason)
        self.spaces = self.useFixture(netns.Namespaces(1, prefix='pgs'))
        self.space = self.spaces[0]
        self.postgres = self.useFixture(
            postgres_pair.PostgresInNamespace(self.space, 'h37db'))
        # Whatever happens, the link is up before the server and the
        # namespace go (cleanups run last-in, first-out).
        self.addCleanup(self.spaces.restore, self.space)

    def _database(self, bounds):
        db = api.Database(self.postgres.url, libpq_bounds=bounds)
        self.addCleanup(db.dispose)
        return db

    def _query_after_cut(self, db):
        """Start a transaction, cut the link, run the next query of it
        in a thread; (thread, outcome dict, time of the cut)."""
        outcome = {}
        started = threading.Event()

        def transaction():
            try:
                with db.reader() as session:
                    session.execute(sa.text('SELECT 1')).scalar()
                    started.set()
                    outcome['cut'].wait(30)
                    outcome['value'] = session.execute(
                        sa.text('SELECT 2')).scalar()
            except Exception as exc:  # noqa: BLE001 - handed to the test
                outcome['error'] = exc
            finally:
                outcome['ended'] = time.monotonic()
                started.set()

        outcome['cut'] = threading.Event()
        thread = threading.Thread(target=transaction, daemon=True)
        thread.start()
        self.assertTrue(started.wait(30), "the first query did not run")
        self.assertNotIn('error', outcome)
        self.spaces.cut(self.space)
        self.assertTrue(self.spaces.is_cut(self.space))
        cut_at = time.monotonic()
        outcome['cut'].set()
        return thread, outcome, cut_at

    def test_a_bounded_query_fails_within_tcp_user_timeout(self):
        db = self._database({'keepalives': 1, 'keepalives_idle': 1,
                             'keepalives_interval': 1, 'keepalives_count': 3,
                             'tcp_user_timeout': BOUND_MS})
        thread, outcome, cut_at = self._query_after_cut(db)
        thread.join(ERROR_WITHIN_S)
        self.assertFalse(thread.is_alive(),
                         f"a query to a silent server still waits after "
                         f"{ERROR_WITHIN_S} s with tcp_user_timeout = "
                         f"{BOUND_MS} ms")
        waited = outcome['ended'] - cut_at
        print(f"silent server, tcp_user_timeout={BOUND_MS} ms: the query "
              f"failed after {waited:.1f} s")
        self.assertNotIn('value', outcome)
        error = outcome['error']
        self.assertIsInstance(error, exception.DatabaseError)
        self.assertNotIn('\n', str(error))
        self.assertIn(self.postgres.address, str(error))
        # Not before the bound: the kernel's own give-up, not another
        # error.
        self.assertGreaterEqual(waited, BOUND_MS / 1000 * 0.9)
        # The link back, the same Database serves again (a new
        # connection: the pool dropped the dead one) once the root end
        # resolves the address again (a failed neighbour entry answers
        # 'No route to host' for a few seconds).
        self.spaces.restore(self.space)
        deadline = time.monotonic() + RESUME_WITHIN_S
        while True:
            try:
                with db.reader() as session:
                    self.assertEqual(3, session.execute(
                        sa.text('SELECT 3')).scalar())
                break
            except exception.DatabaseError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)

    def test_an_unbounded_query_waits_on_a_silent_server(self):
        # No bounds: what every connection had before [database]
        # keepalives_* and tcp_user_timeout.
        db = self._database(None)
        thread, outcome, cut_at = self._query_after_cut(db)
        thread.join(2 * BOUND_MS / 1000)
        self.assertTrue(thread.is_alive(),
                        f"without bounds the query ended after "
                        f"{outcome.get('ended', 0) - cut_at:.1f} s: "
                        f"{outcome.get('error')!r}")
        waiting = time.monotonic() - cut_at
        self.spaces.restore(self.space)
        thread.join(RESUME_WITHIN_S)
        self.assertFalse(thread.is_alive(),
                         f"the query did not resume within "
                         f"{RESUME_WITHIN_S} s of the link's return")
        print(f"silent server, no bounds: the query still waited after "
              f"{waiting:.1f} s; it finished "
              f"{outcome['ended'] - cut_at:.1f} s after the cut, once the "
              f"link was back")
        self.assertEqual(2, outcome.get('value'), outcome.get('error'))
