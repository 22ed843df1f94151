"""PostgreSQL primary lost, standby promoted, while migrations run.

Real daemons (a conductor and five compute agents, harness.py) over
RabbitMQ and a PostgreSQL pair of the test's own: a primary with a
synchronous streaming standby (tests/fixtures/postgres_pair.py), which
every daemon and the test reach by libpq's multi-host URL with
``target_session_attrs=read-write``, as the deployment guide says.

Each round moves every guest once around a failover (outages.py,
PRIMARY_FAILOVER): the primary's processes are all killed (its machine
lost), the standby promoted 5 s later (what a failover manager takes to
decide), and the round requires:

* every migration asked for completes (a failover is no cause to fail
  one), migrations in flight included;
* a request made during the switch is refused with one line naming the
  database, and asked again under the same migration uuid once the
  standby is promoted, succeeds;
* no record lost: every guest's record is still there, every migration
  whose request was answered is recorded;
* the world check (world.py) is clean within 15 s of the promotion; the
  settle time is printed.

After the first round a new standby is built from the promoted server
where the lost primary listened, and a second round fails over back.
The test takes about 45 s on the project's 2-core machines and runs
always.
"""

import os
import random

import testtools

from numamig.db import instances
from tests import base
from tests.fixtures import postgres_pair
from tests.functional.faults import harness
from tests.functional.faults import outages
from tests.functional.faults import test_outages

SEED_ENV = test_outages.SEED_ENV


class FailoverTest(base.TestCase):

    def setUp(self):
        super().setUp()
        reason = harness.missing_requirements() or \
            postgres_pair.missing_requirements()
        if reason:
            # tools/dev.sh installs what this needs: a missing part is a
            # broken install, not an opt-in.
            self.fail(reason)
        self.seed = int(os.environ.get(SEED_ENV) or random.randrange(10**6))
        self.rng = random.Random(self.seed)

    def _guests(self):
        return sorted(r.instance.uuid
                      for r in instances.get_all(self.dep.db))

    def test_primary_lost_standby_promoted(self):
        self.dep = self.useFixture(harness.FaultDeployment(
            hosts=test_outages.HOSTS, standby=True))
        self.dep.create_guests(test_outages.GUESTS_PER_HOST,
                               vcpus=test_outages.GUEST_VCPUS)
        guests = self._guests()
        results = []
        for count in range(2):
            if count:
                self.dep.pair.rebuild_standby()
            plan = outages.plan_round(
                self.dep, self.rng, first=count == 0,
                lead_s=outages.RECORDING_LEAD_S if count == 1 else None)
            result = outages.run_round(self.dep, outages.PRIMARY_FAILOVER,
                                       plan, self.rng)
            if self._guests() != guests:
                result.problems.append(
                    f"guest records lost or added by the failover: "
                    f"{len(guests)} before, {len(self._guests())} after")
            if self.dep.pair.in_recovery(self.dep.pair.standby):
                result.problems.append("the standby was not promoted")
            results.append(result)
            print(f"round {count + 1}: settled {result.settle_s} s after "
                  f"the promotion, {len(result.ends)} migrations, "
                  f"{len(result.refused)} refused, problems "
                  f"{result.problems[:3]}", flush=True)
        lines = [f"seed {self.seed} ({SEED_ENV} replays it)",
                 *outages.summary(results)]
        for result in results:
            lines.append(f"round settled {result.settle_s:.1f} s after "
                         f"the promotion, refused {len(result.refused)}" +
                         ''.join(f"\n    {t[:400]}"
                                 for _g, t in result.refused[:1]))
            if not result.clean:
                lines += outages.describe(result)
        text = '\n'.join(lines)
        print(text)
        self.addDetail('failover-summary', testtools.content.text_content(
            text))
        unclean = [r for r in results if not r.clean]
        if unclean:
            self.addDetail('daemon-logs', testtools.content.text_content(
                self.dep.logs(6000)))
        self.assertEqual([], [r.fault for r in unclean], text)
