"""The fault-injection suite: break a running deployment, check the world.

A conductor and three compute agents run as processes over RabbitMQ and
PostgreSQL, both behind proxies the test holds (harness.py). Each round
migrates four guests at once and makes one fault while they run
(rounds.py); then the world must settle clean (world.py): every
migration final with its reason, no claim left, each guest on exactly
one host, no pCPU pinned twice in the records, the agents' reports or
the live domain XML.

* ``test_short_subset`` runs always: one round of a few faults of each
  kind (kills at a random moment and at a status, a cut and a freeze of
  the broker and of the database), in about a minute and a half;
* ``test_long_run`` runs when NUMAMIG_FAULT_ROUNDS=N is set: N rounds of
  every fault (kills of every role at random moments and at every
  status, cuts and freezes of both proxies), in a random order.
  NUMAMIG_FAULT_SEED=S replays an order and its random moments;
  NUMAMIG_FAULTS=name,name runs only those faults (names as printed).

Both print a summary (rounds run per fault, rounds clean, time to settle
median and max) and fail on any unclean round that is not a known
failure (KNOWN_FAILURES: the fault, and exactly why it fails).
"""

import os
import random

import testtools

from tests import base
from tests.functional.faults import harness
from tests.functional.faults import rounds

ROUNDS_ENV = 'NUMAMIG_FAULT_ROUNDS'
SEED_ENV = 'NUMAMIG_FAULT_SEED'
FAULTS_ENV = 'NUMAMIG_FAULTS'
GUESTS_PER_HOST = 3


# Failures the suite found that are not fixed yet; a round counts as one
# only when every problem it shows is that failure (rounds.KnownFailure:
# its name, exactly why, and a matcher of its problems). None now: the
# three found before (a start request lost with a killed source or
# conductor, and a raw timeout from a killed agent) are fixed, and a
# round that shows one again fails.
KNOWN_FAILURES = ()


class FaultSuiteTest(base.TestCase):

    def setUp(self):
        super().setUp()
        reason = harness.missing_requirements()
        if reason:
            self.skipTest(reason)
        self.dep = self.useFixture(harness.FaultDeployment(hosts=3))
        self.dep.create_guests(GUESTS_PER_HOST)
        self.seed = int(os.environ.get(SEED_ENV) or random.randrange(10**6))
        self.rng = random.Random(self.seed)
        self.results = []

    def run_faults(self, faults):
        for fault in faults:
            result = rounds.run_round(self.dep, fault, self.rng,
                                      known=KNOWN_FAILURES)
            self.results.append(result)
        self.report()

    def report(self):
        lines = [f"seed {self.seed} ({SEED_ENV} replays it)",
                 *rounds.summary(self.results)]
        for result in self.results:
            if result.missed:
                lines.append(f"{result.fault}: fault not made: "
                             f"{result.missed}")
            if not result.clean:
                label = f"KNOWN FAILURE ({result.known})" if result.known \
                    else "UNCLEAN"
                lines.append(f"{result.fault}: {label}:")
                lines += [f"    {p}" for p in result.problems[:10]]
            lines += [f"    {result.fault}: {status} "
                      f"{_after(after)} after the fault cleared: {error}"
                      for status, error, after in result.ends if error]
        text = '\n'.join(lines)
        print(text)
        self.addDetail('fault-summary', testtools.content.text_content(text))
        unclean = [r for r in self.results if not r.clean and not r.known]
        if unclean:
            self.addDetail('daemon-logs', testtools.content.text_content(
                self.dep.logs(6000)))
        self.assertEqual([], [r.fault for r in unclean], text)

    def test_short_subset(self):
        self.run_faults([
            rounds.kill_random('conductor'),
            rounds.kill_at('source', 'running'),
            rounds.kill_at('conductor', 'queued'),
            rounds.outage('cut', 'broker', 5),
            rounds.outage('freeze', 'broker', 5),
            rounds.outage('cut', 'database', 5),
            rounds.outage('freeze', 'database', 5),
        ])

    def test_long_run(self):
        count = int(os.environ.get(ROUNDS_ENV) or 0)
        if count <= 0:
            self.skipTest(f"set {ROUNDS_ENV}=N to run N rounds of every "
                          f"fault")
        chosen = os.environ.get(FAULTS_ENV)
        faults = [f for f in rounds.every_fault()
                  if not chosen or f.name in chosen.split(',')] * count
        self.rng.shuffle(faults)
        self.run_faults(faults)


def _after(seconds):
    return '?' if seconds is None else f"{seconds:.1f} s"
