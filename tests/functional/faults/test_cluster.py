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
  then started together;
* ``CLUSTER_KILL``: the three nodes SIGKILLed at once (each with every
  process of its session: only the fixture's nodes, never the machine's
  RabbitMQ) while migrations run, as the first round's leader kill
  (0.3 s after ten requests, or at a random moment), and started
  together 5 s later: nothing was shut down cleanly, the quorum queues
  recover from their logs.

and requires, as the other outage rounds do: every migration asked for
completes; a request made during the fault that got no answer was told
so in one line and, asked again under the same migration uuid,
succeeds; no daemon logged a traceback; the world check (world.py) is
clean within 20 s of the node's (or the cluster's) return; the settle
time is printed.

``test_leader_node_killed``, ``test_whole_cluster_restarted`` and
``test_whole_cluster_killed`` run always, two rounds each (about 3
minutes together, the cluster's start included); ``test_many_rounds``
runs when NUMAMIG_CLUSTER_ROUNDS=N is set: N rounds of each fault in a
random order (NUMAMIG_FAULT_SEED=S replays it).

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
ROUNDS_ENV = 'NUMAMIG_CLUSTER_ROUNDS'


def _seconds(value):
    return 'never' if value is None else f"{value:.1f} s"


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

    def deploy(self):
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

    def run_rounds(self, faults):
        results = []
        seen = {}
        for outage in faults:
            index = seen.get(outage.name, 0)
            seen[outage.name] = index + 1
            # The first round as the issue asked (every request at once,
            # the fault 0.3 s later); the others with requests during and
            # after the fault too, the fault as soon.
            plan = outages.plan_round(self.dep, self.rng, first=index == 0,
                                      lead_s=outages.ISSUE_LEAD_S)
            result = outages.run_round(self.dep, outage, plan, self.rng)
            results.append(result)
            print(f"{outage.name} round {index + 1} (node "
                  f"{self.dep.fault_node}, {result.in_flight} migrations "
                  f"in flight): back {result.outage_s:.1f} s "
                  f"after the fault, the last migration asked before it "
                  f"ended {_seconds(result.last_end_s)} after it, "
                  f"settled {_seconds(result.settle_s)} after it was "
                  f"back, {len(result.ends)} migrations, "
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

    def test_many_rounds(self):
        count = int(os.environ.get(ROUNDS_ENV) or 0)
        if count <= 0:
            self.skipTest(f"set {ROUNDS_ENV}=N to run N rounds of each "
                          f"cluster fault")
        faults = [outages.LEADER_KILL, outages.CLUSTER_RESTART,
                  outages.CLUSTER_KILL] * count
        self.rng.shuffle(faults)
        self.deploy()
        self.run_rounds(faults)

    def test_leader_node_killed(self):
        self.deploy()
        self.run_rounds([outages.LEADER_KILL] * 2)

    def test_whole_cluster_restarted(self):
        self.deploy()
        self.run_rounds([outages.CLUSTER_RESTART] * 2)

    def test_whole_cluster_killed(self):
        self.deploy()
        self.run_rounds([outages.CLUSTER_KILL] * 2)
