"""Outages a deployment must ride out: the database for 20 s, a broker restart.

Real daemons (a conductor and five compute agents) over RabbitMQ and
PostgreSQL, each behind a proxy the test holds (harness.py). Each round
moves every guest once: most at once before the outage, some during it
and some just after, half of them with the scheduler choosing and half
to a destination named (outages.py). A round fails on any migration
that does not complete (neither outage is a cause to fail one), on a
request refused for a cause other than the outage, on a settle time over
the outage's target (15 s after the database is back, 20 s after the
broker restarted) and on any disagreement between the records, the live
XML and the agents' reports (world.py).

* ``test_database_cut`` and ``test_broker_restart`` run always: two
  rounds each (the first with every request at once and the fault 0.3 s
  later, as the issue's reproduction made it; the second with the fault
  while the conductor records and admits the requests), about 110 s and
  50 s;
* ``test_many_rounds`` runs when NUMAMIG_OUTAGE_ROUNDS=N is set: N
  rounds of each outage in a random order (NUMAMIG_FAULT_SEED=S replays
  it; NUMAMIG_OUTAGES=name,name runs only those outages, names as
  printed).

Each prints per outage: rounds, migrations, their outcomes, and the
settle time's median and max.
"""

import os
import random

import testtools

from tests import base
from tests.functional.faults import harness
from tests.functional.faults import outages

ROUNDS_ENV = 'NUMAMIG_OUTAGE_ROUNDS'
OUTAGES_ENV = 'NUMAMIG_OUTAGES'
SEED_ENV = 'NUMAMIG_FAULT_SEED'
HOSTS = 5
GUESTS_PER_HOST = 2
# One dedicated vCPU each: a host has 12 dedicated pCPUs, more than all
# the guests of the deployment need, so that no destination, named or
# chosen, is ever truly full, whatever the order the moves run in (with
# two vCPUs a named destination was, now and then, when the scheduler
# had sent guests there first, and its true "does not fit" was taken
# for a false reason).
GUEST_VCPUS = 1


class OutageTest(base.TestCase):

    def setUp(self):
        super().setUp()
        reason = harness.missing_requirements()
        if reason:
            self.skipTest(reason)
        self.seed = int(os.environ.get(SEED_ENV) or random.randrange(10**6))
        self.rng = random.Random(self.seed)
        self.results = []

    def deploy(self):
        self.dep = self.useFixture(harness.FaultDeployment(hosts=HOSTS))
        self.dep.create_guests(GUESTS_PER_HOST, vcpus=GUEST_VCPUS)

    def run_rounds(self, faults):
        seen = {}
        for outage in faults:
            count = seen.get(outage.name, 0)
            seen[outage.name] = count + 1
            # The first round as the issue made it, the second while the
            # requests are recorded and admitted, then random moments.
            plan = outages.plan_round(
                self.dep, self.rng, first=count == 0,
                lead_s=outages.RECORDING_LEAD_S if count == 1 else None)
            self.results.append(outages.run_round(self.dep, outage, plan,
                                                  self.rng))
        self.report()

    def report(self):
        lines = [f"seed {self.seed} ({SEED_ENV} replays it)",
                 *outages.summary(self.results)]
        for result in self.results:
            if not result.clean:
                lines += outages.describe(result)
        text = '\n'.join(lines)
        print(text)
        self.addDetail('outage-summary', testtools.content.text_content(text))
        unclean = [r for r in self.results if not r.clean]
        if unclean:
            self.addDetail('daemon-logs', testtools.content.text_content(
                self.dep.logs(6000)))
        self.assertEqual([], [r.fault for r in unclean], text)

    def test_database_cut(self):
        self.deploy()
        self.run_rounds([outages.DATABASE_CUT] * 2)

    def test_broker_restart(self):
        self.deploy()
        self.run_rounds([outages.BROKER_RESTART] * 2)

    def test_many_rounds(self):
        count = int(os.environ.get(ROUNDS_ENV) or 0)
        if count <= 0:
            self.skipTest(f"set {ROUNDS_ENV}=N to run N rounds of each "
                          f"outage")
        chosen = os.environ.get(OUTAGES_ENV)
        faults = [f for f in (outages.DATABASE_CUT, outages.BROKER_RESTART)
                  if not chosen or f.name in chosen.split(',')] * count
        self.deploy()
        self.rng.shuffle(faults)
        self.run_rounds(faults)
