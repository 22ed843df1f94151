"""A PostgreSQL primary that goes silent: libpq's bounds give up on it.

A primary whose host loses power or its network, or whose address a
failover moves, resets nothing. Its clients' connections stay open, and
a statement sent to it waits for the kernel's own limits: about 15
minutes of retransmissions with data unacknowledged, 2 hours of
keepalive idle when the statement went out and its answer never comes.
A conductor blocked so long holds its migrations past their leases.

Here the client (numamig.db.api.Database, as a conductor holds it)
runs in a network namespace of the test's own (tests/fixtures/netns.py)
and reaches this machine's PostgreSQL through a proxy on the root end
of the namespace's link; the namespace's end of the link is then taken
down, as a pulled cable: nothing is reset, packets vanish. With the
``[database]`` bounds (numamig.db.libpq) the pooled connection fails
within them and the client says so in one line; without them it is
still waiting several times later.
"""

import os
import select
import subprocess
import sys
import time

import sqlalchemy as sa

from tests import base
from tests.fixtures import database
from tests.fixtures import netns
from tests.functional.faults import proxy

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))

# The client: connect, answer 'ready', then at each line from the test
# run one statement and print how it ended and after how long.
CLIENT = r'''
import json, sys, time
import sqlalchemy as sa
from numamig.db import api
db = api.Database(sys.argv[1], libpq_bounds=json.loads(sys.argv[2]))
with db.reader() as session:
    session.execute(sa.text('SELECT 1'))
print('ready', flush=True)
for line in sys.stdin:
    began = time.monotonic()
    try:
        with db.reader() as session:
            session.execute(sa.text(line.strip()))
        print('answered', round(time.monotonic() - began, 1), flush=True)
    except Exception as exc:
        print('failed', round(time.monotonic() - began, 1),
              type(exc).__name__, flush=True)
'''

# Tight bounds so that the test is short: a statement unacknowledged
# for 2 s, an answer awaited past 1 s idle + 2 probes 1 s apart.
TIGHT = {'keepalives': 1, 'keepalives_idle': 1, 'keepalives_interval': 1,
         'keepalives_count': 2, 'tcp_user_timeout': 2000}
# What the client may take beyond the bounds (a loaded 2-core machine).
SLACK_S = 8
# Long enough after the bounds to call an unbounded client blocked.
BLOCKED_S = 10


class SilentPrimaryTest(base.TestCase):

    def setUp(self):
        super().setUp()
        reason = netns.missing_requirements()
        if reason:
            self.fail(reason)
        database.server_or_skip(self, 'postgresql')
        server = self.useFixture(database.ServerDatabase('postgresql'))
        self.spaces = self.useFixture(netns.Namespaces(1, prefix='pg'))
        self.space = self.spaces[0]
        url = sa.engine.make_url(server.url)
        link = proxy.Proxy((url.host or '127.0.0.1', url.port or 5432),
                           'silent-primary', listen=self.space.host_address)
        # Closed before the database is dropped (clean-ups run last
        # first): its server sessions end with it.
        self.addCleanup(link.close)
        self.url = url.set(host=self.space.host_address,
                           port=link.port).render_as_string(
                               hide_password=False)

    def client(self, bounds):
        import json
        env = dict(os.environ, PYTHONPATH=ROOT)
        proc = subprocess.Popen(
            self.space.command([sys.executable, '-c', CLIENT, self.url,
                                json.dumps(bounds)]),
            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True, env=env)
        self.addCleanup(self._stop, proc)
        self.assertEqual('ready', self.line(proc, 30),
                         proc.stderr.read() if proc.poll() is not None
                         else '')
        return proc

    def _stop(self, proc):
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=30)
        for stream in (proc.stdin, proc.stdout, proc.stderr):
            stream.close()

    @staticmethod
    def line(proc, timeout):
        """The client's next line within ``timeout`` s, or None."""
        ready, _, _ = select.select([proc.stdout], [], [], timeout)
        return proc.stdout.readline().strip() if ready else None

    def ask(self, proc, statement):
        proc.stdin.write(statement + '\n')
        proc.stdin.flush()

    def assert_failed_within(self, said, bound_s):
        self.assertIsNotNone(said, "the client is still waiting")
        verdict, seconds = said.split()[:2]
        self.assertEqual('failed', verdict, said)
        self.assertLess(float(seconds), bound_s + SLACK_S, said)
        print(f"silent primary given up after {seconds} s (bound "
              f"{bound_s} s): {said}", flush=True)

    def test_a_statement_sent_to_a_silent_primary_fails_within_the_bound(
            self):
        proc = self.client(TIGHT)
        self.spaces.cut(self.space)
        began = time.monotonic()
        self.ask(proc, 'SELECT 1')
        self.assert_failed_within(self.line(proc, 2 + SLACK_S), 2)
        self.assertLess(time.monotonic() - began, 2 + SLACK_S)

    def test_an_answer_that_never_comes_fails_within_the_keepalives(self):
        proc = self.client(TIGHT)
        # The statement is on the server, acknowledged, when the link
        # goes: only keepalives can tell its answer will not come.
        self.ask(proc, 'SELECT pg_sleep(60)')
        time.sleep(1.0)
        self.spaces.cut(self.space)
        self.assert_failed_within(self.line(proc, 3 + SLACK_S), 3)

    def test_without_the_bounds_the_client_is_still_waiting(self):
        proc = self.client({})
        self.spaces.cut(self.space)
        self.ask(proc, 'SELECT 1')
        # Several times the bounds above: still nothing, the kernel's
        # retransmissions go on for minutes.
        self.assertIsNone(self.line(proc, BLOCKED_S))
        self.assertIsNone(proc.poll())
        print(f"without bounds: still waiting after {BLOCKED_S} s",
              flush=True)
