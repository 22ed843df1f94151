"""Conductor workers racing on one record: exactly one wins, every time.

Each race starts its workers (real threads, each with its own database
connection) at a barrier, on PostgreSQL, MariaDB and SQLite, and is repeated
for several rounds so that different interleavings are exercised.
"""

import functools
import threading

import fixtures

from numamig import exception
from numamig.db import instances
from numamig.db import migrations
from tests.functional.db import base
from tests.unit.db import base as unit_base

WORKERS = 4
ROUNDS = 8


def race(calls):
    """Run ``calls`` in threads released together; return their outcomes.

    :returns: [(True, result) or (False, exception)] in call order.
    """
    barrier = threading.Barrier(len(calls), timeout=30)
    outcomes = [None] * len(calls)

    def run(index, call):
        barrier.wait()
        try:
            outcomes[index] = (True, call())
        except Exception as exc:  # noqa: BLE001 - the outcome under test
            outcomes[index] = (False, exc)

    threads = [threading.Thread(target=run, args=(i, call))
               for i, call in enumerate(calls)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    return outcomes


class _Races:
    """What every race of this module does with its records."""

    def _instance(self):
        return instances.create(self.db, unit_base.make_instance()).instance

    def _migration(self, instance, **overrides):
        return migrations.create(
            self.db, unit_base.make_migration(instance.uuid, **overrides))

    def _split(self, outcomes, loser_class):
        winners = [value for ok, value in outcomes if ok]
        losers = [value for ok, value in outcomes if not ok]
        self.assertEqual(1, len(winners), outcomes)
        for exc in losers:
            self.assertIsInstance(exc, loser_class)
        return winners[0], losers


class RaceTestCase(_Races, base.ServerDBTestCase):

    def test_status_change_race(self):
        for _ in range(ROUNDS):
            migration = self._migration(self._instance(), status='running')
            targets = ['post-migrating', 'cancelled'] * (WORKERS // 2)
            outcomes = race([
                functools.partial(migrations.set_status, self.db,
                                  migration.uuid, status)
                for status in targets])
            winner, losers = self._split(outcomes,
                                         exception.InvalidStatusTransition)
            for exc in losers:
                self.assertIn(f'from status {winner.status} to', str(exc))
            stored = migrations.get(self.db, migration.uuid)
            self.assertEqual(['running', winner.status],
                             [h.status for h in stored.history])

    def test_second_migration_request_race(self):
        # Issue 14 row 4: requests for one guest at once, each its own
        # conductor worker; the database lets exactly one be recorded.
        for _ in range(ROUNDS):
            instance = self._instance()
            outcomes = race([
                functools.partial(
                    migrations.create, self.db,
                    unit_base.make_migration(instance.uuid,
                                             status='accepted'),
                    max_queued=100)
                for _ in range(WORKERS)])
            winner, losers = self._split(outcomes, exception.InstanceBusy)
            for exc in losers:
                self.assertIn(f'migration {winner.uuid} of it is accepted',
                              str(exc))
            recorded = migrations.get_all(self.db,
                                          instance_uuid=instance.uuid)
            self.assertEqual([winner.uuid], [m.uuid for m in recorded])

    def test_claim_race(self):
        for round_ in range(ROUNDS):
            instance = self._instance()
            hosts = [f'dst{round_}-{n}' for n in range(WORKERS)]
            contexts = [unit_base.make_context(
                instance, self._migration(instance).uuid, dest_host=host)
                for host in hosts]
            outcomes = race([
                functools.partial(instances.set_migration_context, self.db,
                                  instance.uuid, context)
                for context in contexts])
            winner, losers = self._split(outcomes,
                                         exception.MigrationContextConflict)
            held = winner.instance.migration_context
            for exc in losers:
                self.assertIn(f'held by migration {held.migration_uuid}',
                              str(exc))
            stored = instances.get(self.db, instance.uuid)
            self.assertEqual(held, stored.instance.migration_context)
            self.assertEqual(2, stored.revision)
            claims = [r.instance.uuid for host in hosts for r in
                      instances.get_claims_on_host(self.db, host)]
            self.assertEqual([instance.uuid], claims)

    def test_apply_and_drop_race(self):
        # Success (apply) and rollback (drop) of one claim: exactly one
        # takes effect, never both, never neither.
        for _ in range(ROUNDS):
            instance = self._instance()
            migration = self._migration(instance)
            instances.set_migration_context(
                self.db, instance.uuid,
                unit_base.make_context(instance, migration.uuid))
            (applied, apply_result), (_, dropped) = race([
                functools.partial(function, self.db, instance.uuid,
                                  migration.uuid)
                for function in (instances.apply_migration_context,
                                 instances.drop_migration_context)])
            stored = instances.get(self.db, instance.uuid).instance
            self.assertIsNone(stored.migration_context)
            if applied:
                self.assertIs(False, dropped)
                self.assertEqual('dst', stored.host)
            else:
                self.assertIsInstance(apply_result,
                                      exception.ConcurrentUpdate)
                self.assertIs(True, dropped)
                self.assertEqual('src', stored.host)


class ReadBeforeWriteRaceTestCase(_Races, base.ServerDBTestCase):
    """On a server only: SQLite write transactions start with BEGIN
    IMMEDIATE, so two of its workers can never both read before either
    writes."""

    scenarios = base.SERVERS

    def test_update_race_after_both_read(self):
        # Every worker reads revision 1 before any writes: only the
        # conditional UPDATE can tell them apart.
        barrier = threading.Barrier(WORKERS, timeout=30)
        real_check = instances._check_revision

        def check_then_wait(row, expected):
            real_check(row, expected)
            barrier.wait()
        self.useFixture(fixtures.MonkeyPatch(
            'numamig.db.instances._check_revision', check_then_wait))
        for _ in range(ROUNDS):
            barrier.reset()
            instance = self._instance()
            outcomes = race([
                functools.partial(instances.update, self.db, instance.uuid,
                                  {'task_state': f'worker{n}'})
                for n in range(WORKERS)])
            winner, losers = self._split(outcomes,
                                         exception.ConcurrentUpdate)
            for exc in losers:
                self.assertIn('expected revision 1, found 2', str(exc))
            stored = instances.get(self.db, instance.uuid)
            self.assertEqual((2, winner.instance.task_state),
                             (stored.revision, stored.instance.task_state))
