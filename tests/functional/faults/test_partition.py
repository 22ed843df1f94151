"""One of three conductor hosts cut off while it drives migrations and a drain.

Three numamig-conductor processes, each in a network namespace of its
own (a conductor host), reach RabbitMQ and PostgreSQL only over their
own link; five compute agents run on test-driver hosts (harness.py).
Each round (partition.py) drains a host and migrates guests of the
others, cuts off the conductor seen holding a lease on one of those
migrations (its link down), keeps it cut until the others took over
what it held, brings the link back and waits for the world check; it
fails on anything the cut conductor did twice or did after its lease
was taken over (fencing by lease, read from the records), on a drain
that does not complete, and on an unclean world.

The conductors run with ``[conductor] stalled_migration_interval = 2``:
leases of 6 s (three renewal intervals), swept every 2 s, so that a
round takes seconds; the defaults (15 s leases, a sweep every 10 s)
take over in 15-25 s (NUMAMIG_PARTITION_SWEEP_S=10 runs with them), and
the figures printed say how long it took.

Two kinds of round: the conductor cut the moment it is seen holding a
lease (on a drain's move if one is seen within 3 s), and the conductor
cut the moment it is seen inside a database transaction that wrote or
locked rows, so that its session stays open on the server with its
locks. The second is what ``[database] idle_in_transaction_timeout``
exists for: without it PostgreSQL kept the cut conductor's admission
lock until the link came back (in production: until its TCP keepalives
gave up, two hours by default), and no migration moved anywhere
meanwhile (measured: nothing recorded, admitted or changed in the 20 s
of the cut); the round fails when the others change nothing within
the idle-in-transaction timeout (5 s) for each of the cut conductor's
sessions left inside a transaction, or a lease and a sweep, plus 3 s.

``test_conductor_cut_off`` runs always: one round of each, a different
drained host each, about 55 s. NUMAMIG_PARTITION_ROUNDS=N runs N of
each; NUMAMIG_FAULT_SEED=S replays the random choices.
"""

import os
import random

import testtools

from tests import base
from tests.fixtures import netns
from tests.functional.faults import harness
from tests.functional.faults import partition
from tests.functional.faults import test_outages

SEED_ENV = test_outages.SEED_ENV
ROUNDS_ENV = 'NUMAMIG_PARTITION_ROUNDS'
HOSTS = 5
GUESTS_PER_HOST = 3
CONDUCTORS = 3
# Guests of the hosts not drained that migrate during a round.
MOVERS = 4
# [conductor] stalled_migration_interval for the round (the lease is
# three times it, capped at 15 s); NUMAMIG_PARTITION_SWEEP_S=10 measures
# the default.
SWEEP_ENV = 'NUMAMIG_PARTITION_SWEEP_S'



class ConductorPartitionTest(base.TestCase):

    def setUp(self):
        super().setUp()
        reason = harness.missing_requirements() or \
            netns.missing_requirements()
        if reason:
            # tools/dev.sh and the test command install what this needs
            # (iproute2 among it): a missing part is a broken install.
            self.fail(reason)
        self.seed = int(os.environ.get(SEED_ENV) or random.randrange(10**6))
        self.rng = random.Random(self.seed)

    def test_conductor_cut_off(self):
        count = int(os.environ.get(ROUNDS_ENV) or 1)
        self.run_rounds(['lease', 'transaction'] * count)

    def run_rounds(self, moments):
        count = len(moments)
        dep = self.useFixture(harness.FaultDeployment(
            hosts=HOSTS, conductors=CONDUCTORS,
            conductor_options=(
                f"stalled_migration_interval = "
                f"{int(os.environ.get(SWEEP_ENV) or 2)}",)))
        dep.create_guests(GUESTS_PER_HOST, vcpus=test_outages.GUEST_VCPUS)
        results = []
        drained = self.rng.sample(dep.hosts, min(count, len(dep.hosts)))
        for index, moment in enumerate(moments):
            result = partition.run_round(
                dep, self.rng, drained[index % len(drained)], MOVERS,
                moment=moment)
            results.append(result)
            # Each round's figures as it ends: a long run shows progress.
            print('\n'.join(partition.summary([result])[1:2]), flush=True)
            # The next round drains another host: the guests come back
            # only by that drain and the scheduler, so none is reset.
        text = '\n'.join([f"seed {self.seed} ({SEED_ENV} replays it)",
                          *partition.summary(results)])
        print(text)
        self.addDetail('partition-summary',
                       testtools.content.text_content(text))
        if not all(r.clean for r in results):
            self.addDetail('daemon-logs', testtools.content.text_content(
                dep.logs(6000)))
        self.assertEqual([], [r.victim for r in results if not r.clean],
                         text)
