"""Real-tier agents in the multi-host deployment: libvirtd + QEMU hosts
whose daemons reach a RabbitMQ cluster and a PostgreSQL primary with a
standby the way the deployment guide says.

``numamig-ci --local-libvirt 2`` (two libvirtd hosts, a conductor and
two compute agents as processes, TCG guests) runs scenarios that
create, migrate, abort and delete real guests, with ``--transport-url``
listing the three nodes of a cluster of the test's own
(tests/fixtures/rabbit_cluster.py), quorum queues for every queue
(``[oslo_messaging_rabbit] rabbit_quorum_queue`` and
``rabbit_transient_quorum_queue`` in a file given with ``--config-file``
to the harness and to every daemon), and ``--database`` the multi-host
URL of a primary with a synchronous standby
(tests/fixtures/postgres_pair.py). Afterwards: every scenario passed,
every queue the run declared on the cluster was a quorum queue, and the
standby holds every row the primary holds (synchronous
replication: nothing answered is lost to a promotion), table by table.

The faults of these parts (a node killed, every node killed, the whole
cluster restarted, a promotion) run with test-driver agents in
test_cluster.py and test_failover.py, where the world check reads every
host.
"""

import os
import subprocess
import sys

import sqlalchemy as sa

from numamig_ci import libvirt_hosts
from tests import base
from tests.fixtures import postgres_pair
from tests.fixtures import rabbit_cluster
from tests.functional.faults import harness

SCENARIOS = ('pins-recomputed', 'abort-copying')
RUN_TIMEOUT_S = 600


class RealAgentsOnTheClusterTest(base.TestCase):

    def setUp(self):
        super().setUp()
        reason = (libvirt_hosts.missing_requirements()
                  or rabbit_cluster.missing_requirements()
                  or postgres_pair.missing_requirements())
        if reason:
            self.fail(reason)
        self.cluster = self.useFixture(rabbit_cluster.RabbitCluster())
        self.pair = self.useFixture(postgres_pair.PostgresPair())
        self.state = self.useFixture(base.fixtures.TempDir()).path
        self.quorum = os.path.join(self.state, 'quorum.conf')
        with open(self.quorum, 'w') as handle:
            handle.write('\n'.join(harness.QUORUM_LINES) + '\n')

    def run_ci(self):
        script = os.path.join(os.path.dirname(sys.executable), 'numamig-ci')
        argv = [script, '--local-libvirt', '2',
                '--transport-url', self.cluster.url,
                '--database', str(self.pair.url),
                '--config-file', self.quorum,
                '--state-dir', os.path.join(self.state, 'ci')]
        for name in SCENARIOS:
            argv += ['--scenario', name]
        done = subprocess.run(argv, capture_output=True, text=True,
                              timeout=RUN_TIMEOUT_S)
        return done.returncode, done.stdout + done.stderr

    def contents(self, port):
        """{table: (rows, digest of its rows)} of the database on the
        server at ``port``."""
        engine = sa.create_engine(sa.engine.make_url(self.pair.url).set(
            query={'host': f'127.0.0.1:{port}'}))
        try:
            with engine.connect() as conn:
                tables = conn.execute(sa.text(
                    "SELECT table_name FROM information_schema.tables "
                    "WHERE table_schema = 'public'")).scalars().all()
                return {table: tuple(conn.execute(sa.text(
                    f"SELECT count(*), md5(coalesce(string_agg(t::text, "
                    f"'|' ORDER BY t::text), '')) FROM \"{table}\" t"
                )).one()) for table in tables}
        finally:
            engine.dispose()

    def test_scenarios_pass_on_the_cluster_and_the_pair(self):
        code, out = self.run_ci()
        self.assertEqual(0, code, out[-4000:])
        self.assertIn(f'numamig-ci: {len(SCENARIOS)} passed, 0 failed, '
                      f'0 skipped', out)
        types = self.cluster.ctl('-q', 'list_queues', '-p',
                                 self.cluster.vhost, 'name', 'type')
        rows = [line.split() for line in types.splitlines()[1:]
                if line.strip()]
        self.assertTrue(rows, "the run declared no queue on the cluster")
        self.assertEqual([], [r for r in rows if r[-1] != 'quorum'],
                         types)
        primary = self.contents(self.pair.primary.port)
        recorded = sum(rows_ for rows_, _digest in primary.values())
        self.assertGreater(primary['compute_nodes'][0], 0, primary)
        self.assertEqual(primary, self.contents(self.pair.standby.port))
        print(f"{recorded} rows in {len(primary)} tables, the same on the "
              f"primary and the standby; {len(rows)} quorum queues",
              flush=True)
