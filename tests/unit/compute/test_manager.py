"""Tests of numamig.compute.manager: the live_migration cast's executor."""

import threading

from numamig import objects
from numamig.compute import manager
from numamig.compute import migration_source
from tests import base
from tests.unit.compute import base as cbase

# Every wait in these tests has this deadline.
WAIT_S = 10


class LiveMigrationExecutorTest(base.TestCase):

    def setUp(self):
        super().setUp()
        self.release = threading.Event()
        self.started = []
        self.changed = threading.Condition()

        def run(job):
            with self.changed:
                self.started.append(job.migration.uuid)
                self.changed.notify_all()
            self.release.wait(WAIT_S)
        self.patch(migration_source.SourceMigration, 'run', run)
        # Whatever a test does, no run outlives it.
        self.addCleanup(self.release.set)

    def _agent(self, **kwargs):
        mocked = cbase.manager(host=cbase.SOURCE)
        agent = manager.ComputeManager(
            cbase.SOURCE, mocked.driver, mocked.conductor_api,
            mocked.compute_api, cbase.settings(**kwargs))
        self.addCleanup(agent.stop, wait=True)
        return agent

    def _cast(self, agent, migration=None):
        inst = cbase.instance(host=cbase.SOURCE)
        migration = migration or cbase.migration(inst)
        agent.live_migration(None, inst, migration, objects.LiveMigrateData(
            instance_uuid=inst.uuid, migration_uuid=migration.uuid))
        return migration

    def _wait_started(self, count):
        with self.changed:
            self.changed.wait_for(lambda: len(self.started) >= count,
                                  WAIT_S)
            return list(self.started)

    def test_returns_before_the_migration_ends(self):
        agent = self._agent()
        migration = self._cast(agent)
        # The handler returned while the run still waits for release.
        self.assertEqual({migration.uuid}, agent.outgoing.uuids())
        self.release.set()
        agent.stop(wait=True)
        self.assertEqual([migration.uuid], self.started)
        self.assertEqual(set(), agent.outgoing.uuids())

    def test_a_repeated_start_is_not_run_twice(self):
        agent = self._agent()
        migration = self._cast(agent)
        self._cast(agent, migration)
        self.release.set()
        agent.stop(wait=True)
        self.assertEqual([migration.uuid], self.started)

    def test_at_most_the_configured_number_run_at_once(self):
        agent = self._agent(max_concurrent_live_migrations=2)
        for _ in range(3):
            self._cast(agent)
        self.assertEqual(2, len(self._wait_started(2)))
        # The third waits for a free worker, registered meanwhile.
        self.assertEqual(2, len(self.started))
        self.assertEqual(3, len(agent.outgoing.uuids()))
        self.release.set()
        self.assertEqual(3, len(self._wait_started(3)))

    def test_the_options_size_and_pace_it(self):
        """An agent built from configuration runs as many migrations at
        once, and paces its reports, as its options say."""
        self.flags(group='compute', max_concurrent_live_migrations=3,
                   min_change_report_interval=0.5)
        agent = self._agent()
        self.assertEqual((3, 0.5), (agent.max_concurrent_live_migrations,
                                    agent.reporter._min_interval))
