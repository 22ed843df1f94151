"""Tests of numamig.compute.previous_release: the agent of release 1.

What that release did differs from today's flows by what it leaves
out; each test checks one thing it must not do (offer, claim, drop,
log) as well as what it still does.
"""

import logging
from unittest import mock

import fixtures

from numamig import exception
from numamig import objects
from numamig import releases
from numamig import rpc
from numamig.compute import previous_release
from tests import base
from tests.unit.compute import base as cbase


class PreviousReleaseTestCase(base.TestCase):

    def setUp(self):
        super().setUp()
        self.logs = self.useFixture(fixtures.FakeLogger(
            name='numamig', level=logging.INFO))
        self.inst = cbase.instance(pins={0: 2, 1: 10})
        self.migration = cbase.migration(self.inst)
        self.agent = cbase.as_release(cbase.agent(), new=False)


class CheckDestinationTest(PreviousReleaseTestCase):

    def _check(self):
        self.agent.compute_api.check_can_live_migrate_source.side_effect = \
            lambda ctxt, instance, data: data.obj_clone()
        return previous_release.check_destination(
            self.agent, None, self.inst, cbase.SOURCE, self.migration.uuid)

    def test_offers_nothing_claims_nothing(self):
        data = self._check()
        sent = self.agent.compute_api.check_can_live_migrate_source.call_args
        self.assertFalse(sent.args[2].dst_supports_numa_live_migration)
        self.assertEqual([], self.agent.tracker.claims())
        self.agent.driver.build_migrate_info.assert_not_called()
        self.assertEqual('1.0', data.VERSION)
        wire = rpc.primitive_for(data)['numamig_object.data']
        self.assertNotIn('dst_supports_numa_live_migration', wire)

    def test_logs_no_old_path(self):
        self._check()
        self.assertNotIn('old path', self.logs.output)

    def test_refuses_a_guest_already_here(self):
        self.agent.driver.list_guests.return_value = {self.inst.uuid: 'g'}
        self.assertRaises(exception.MigrationPreCheckError, self._check)


class CheckSourceTest(PreviousReleaseTestCase):

    def test_sets_no_flag_and_answers_in_the_version_asked(self):
        self.agent.driver.list_guests.return_value = {self.inst.uuid: 'g'}
        data = objects.LiveMigrateData(
            instance_uuid=self.inst.uuid, source_host=cbase.SOURCE,
            dest_host=cbase.HOST, migration_uuid=self.migration.uuid,
            dst_supports_numa_live_migration=True)
        sent = releases.backported(data, '1.0')
        answer = previous_release.check_source(self.agent, None, self.inst,
                                               sent)
        self.assertEqual('1.0', answer.VERSION)
        self.agent.compute_api.supports_numa_live_migration.assert_not_called()

    def test_refuses_a_guest_not_here(self):
        data = objects.LiveMigrateData(instance_uuid=self.inst.uuid)
        self.assertRaises(exception.MigrationPreCheckError,
                          previous_release.check_source, self.agent, None,
                          self.inst, data)


class PostAtDestinationTest(PreviousReleaseTestCase):

    def test_reads_the_placement_back_from_the_guest(self):
        placed = self.inst.obj_clone()
        placed.host = self.agent.host
        self.agent.driver.get_guest_topology.return_value = \
            self.inst.numa_topology
        self.agent.conductor_api.instance_set_placement.return_value = placed
        with mock.patch.object(self.agent.reporter, 'request') as request:
            updated = previous_release.post_at_destination(
                self.agent, None, self.inst, self.migration)
        request.assert_not_called()
        self.assertIs(placed, updated)
        self.agent.conductor_api.instance_set_placement.assert_called_once_with(
            None, self.inst.uuid, self.agent.host, self.inst.numa_topology)
        self.agent.conductor_api.migration_context_apply.assert_not_called()
        self.assertIn(self.inst.uuid, self.agent.tracker.instance_uuids())


class RollbackAtDestinationTest(PreviousReleaseTestCase):

    def test_removes_the_copy_and_drops_no_claim(self):
        self.agent.driver.list_guests.return_value = {self.inst.uuid: 'g'}
        previous_release.rollback_at_destination(self.agent, None, self.inst,
                                                 self.migration)
        self.agent.driver.destroy.assert_called_once_with(self.inst.uuid)
        self.agent.conductor_api.migration_context_drop.assert_not_called()
        self.assertNotIn('old path', self.logs.output)


class LogOldPathTest(PreviousReleaseTestCase):

    def test_says_nothing(self):
        previous_release.log_old_path(self.agent.host, self.migration.uuid,
                                      releases.OLD_PATH_XML, 'why')
        self.assertEqual('', self.logs.output)
