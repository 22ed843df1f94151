"""A RabbitMQ cluster's node lost, and the whole cluster restarted,
while migrations run.

Real daemons (a conductor and five compute agents, harness.py) over a
RabbitMQ cluster of three nodes of the test's own
(tests/fixtures/rabbit_cluster.py), which every daemon and the test
reach by a transport_url listing the three nodes, with every queue a
quorum queue (``[oslo_messaging_rabbit] rabbit_quorum_queue`` and
``rabbit_transient_quorum_queue``), as the deployment guide says;
PostgreSQL as the rest of the fault suite uses it.

Each round moves every guest once around one fault (outages.py):

* ``LEADER_KILL``: the node holding most of the vhost's queue leaders
  (``rabbitmqctl list_queues name leader``) SIGKILLed with every process
  of it, 0.3 s after ten migrations were asked for at once (first
  round) or at a random moment with more requests during and after the
  fault (second round), and started again 8 s later;
* ``CLUSTER_RESTART``: the three nodes stopped one after the other,
  then started together.

and requires, as the other outage rounds do: every migration asked for
completes; a request made during the fault that got no answer was told
so in one line and, asked again under the same migration uuid,
succeeds; no daemon logged a traceback; the world check (world.py) is
clean within 20 s of the node's (or the cluster's) return; the settle
time is printed.

The cluster is started once for the class (it takes 15-20 s on the
project's 2-core machines) and every test gets a vhost of its own on it.
"""

import os
import random

import testtools

from tests import base
from tests.fixtures import rabbit_cluster
from tests.functional.faults import harness
from tests.functional.faults import outages
from tests.functional.faults import test_outages

SEED_ENV = test_outages.SEED_ENV


class ClusterFaultTest(base.TestCase):

    cluster = None

    @classmethod
    def setUpClass(cls):  # noqa: N802 - unittest's hook
        super().setUpClass()
        if harness.missing_requirements() or \
                rabbit_cluster.missing_requirements():
            return      # setUp fails each test with the reason
        # A cluster that fails to form is cleaned up by its setUp.
        cluster = rabbit_cluster.RabbitCluster()
        cluster.setUp()
        cls.cluster = cluster
        print(f"RabbitMQ cluster of {len(cluster.nodes)} nodes up in "
              f"{cluster.start_seconds:.1f} s", flush=True)

    @classmethod
    def tearDownClass(cls):  # noqa: N802 - unittest's hook
        if cls.cluster is not None:
            cls.cluster.cleanUp()
            cls.cluster = None
        super().tearDownClass()

    def setUp(self):
        super().setUp()
        reason = harness.missing_requirements() or \
            rabbit_cluster.missing_requirements()
        if reason:
            # tools/dev.sh installs what this needs: a missing part is a
            # broken install, not an opt-in.
            self.fail(reason)
        self.seed = int(os.environ.get(SEED_ENV) or random.randrange(10**6))
        self.rng = random.Random(self.seed)
        # A test after a cluster restart finds every node running again.
        self.cluster.start_all()
        self.dep = self.useFixture(harness.FaultDeployment(
            hosts=test_outages.HOSTS, cluster=self.cluster))
        self.dep.create_guests(test_outages.GUESTS_PER_HOST,
                               vcpus=test_outages.GUEST_VCPUS)
        # The fault is the cluster's only if the queues are replicated.
        types = {line.split('\t')[1] for line in self.cluster.ctl(
            '-q', 'list_queues', '-p', self.dep.vhost,
            '--no-table-headers', 'name', 'type').splitlines()
            if '\t' in line}
        self.assertEqual({'quorum'}, types)

    def run_rounds(self, outage, count):
        results = []
        for index in range(count):
            plan = outages.plan_round(self.dep, self.rng, first=index == 0)
            result = outages.run_round(self.dep, outage, plan, self.rng)
            results.append(result)
            print(f"{outage.name} round {index + 1} (node "
                  f"{self.dep.fault_node}, {result.in_flight} migrations "
                  f"in flight): back {result.outage_s:.1f} s "
                  f"after the fault, settled {result.settle_s} s after "
                  f"that, {len(result.ends)} migrations, "
                  f"{result.resent} requests asked again, problems "
                  f"{result.problems[:3]}", flush=True)
        lines = [f"seed {self.seed} ({SEED_ENV} replays it)",
                 *outages.summary(results)]
        for result in results:
            lines += [f"    lost answer: {text[:300]}"
                      for _guest, text in result.lost[:2]]
            if not result.clean:
                lines += outages.describe(result)
        text = '\n'.join(lines)
        print(text)
        self.addDetail('cluster-summary', testtools.content.text_content(
            text))
        unclean = [r for r in results if not r.clean]
        if unclean:
            self.addDetail('daemon-logs', testtools.content.text_content(
                self.dep.logs(6000)))
        self.assertEqual([], [r.fault for r in unclean], text)

    def test_leader_node_killed(self):
        self.run_rounds(outages.LEADER_KILL, 2)

    def test_whole_cluster_restarted(self):
        self.run_rounds(outages.CLUSTER_RESTART, 2)
