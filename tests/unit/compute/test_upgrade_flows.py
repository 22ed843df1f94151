"""Each side decides from what it can know: the agent's upgrade rules.

The destination offers NUMA-aware live migration only when the conductor
sent the claim parameters, answers in the version it was asked in, and
drops a claim in its rollback only as a release that had claims; the
source answers in the destination's version and logs each old-path
decision only as new code. The compute RPC client falls back to API 1.0
when an old agent refuses, and carries LiveMigrateData at its version.
"""

import logging
from unittest import mock

import fixtures
import oslo_messaging as messaging
import testscenarios

from numamig import objects
from numamig import releases
from numamig import rpc
from numamig.compute import migration_dest
from numamig.compute import migration_source
from numamig.compute import rpcapi as compute_rpcapi
from tests import base
from tests.unit.compute import base as cbase
from tests.unit.objects import samples

load_tests = testscenarios.load_tests_apply_scenarios

RELEASES = [('new-agent', {'new': True}), ('old-agent', {'new': False})]


def _source_answers(src_flag=True):
    def answer(ctxt, instance, dest_check_data):
        data = dest_check_data.obj_clone()
        data.src_supports_numa_live_migration = bool(
            src_flag and dest_check_data.dst_supports_numa_live_migration)
        return data
    return answer


class AgentTestCase(base.TestCase):

    def setUp(self):
        super().setUp()
        self.logs = self.useFixture(fixtures.FakeLogger(
            name='numamig', level=logging.INFO))
        self.inst = cbase.instance(pins={0: 2, 1: 10})
        self.migration = cbase.migration(self.inst)

    def old_path_logged(self, item):
        return f"old path for the {item}" in self.logs.output


class DestinationAnswerTest(AgentTestCase):

    def setUp(self):
        super().setUp()
        self.agent = cbase.agent()
        self.agent.driver.build_migrate_info.return_value = \
            objects.NUMAMigrateInfo(cell_pins={0: {1}})

    def _check(self, migration=True, src_flag=True):
        self.agent.compute_api.check_can_live_migrate_source.side_effect = \
            _source_answers(src_flag)
        return self.agent.flows.check_destination(
            self.agent, None, self.inst, cbase.SOURCE, self.migration.uuid,
            migration=self.migration if migration else None)

    def test_conductor_at_1_0_gets_live_migrate_data_1_0(self):
        data = self._check(migration=False)
        self.assertEqual('1.0', data.VERSION)
        wire = rpc.primitive_for(data)['numamig_object.data']
        self.assertNotIn('dst_supports_numa_live_migration', wire)
        self.assertTrue(self.old_path_logged(releases.OLD_PATH_NUMA_INFO))
        self.assertIn('the conductor sent compute API 1.0',
                      self.logs.output)

    def test_conductor_at_1_1_gets_the_newest(self):
        data = self._check()
        self.assertEqual(objects.LiveMigrateData.VERSION, data.VERSION)
        self.assertIsNotNone(data.dst_numa_info)
        self.assertFalse(self.old_path_logged(releases.OLD_PATH_NUMA_INFO))

    def test_declining_source_is_named(self):
        self._check(src_flag=False)
        self.assertIn(f"source {cbase.SOURCE} cannot take part",
                      self.logs.output)

    def test_old_agent_logs_no_decision(self):
        self.agent = cbase.as_release(self.agent, new=False)
        self._check(migration=False)
        self.assertEqual('', self.logs.output)


class DestinationRollbackTest(AgentTestCase):

    def setUp(self):
        super().setUp()
        self.agent = cbase.agent()

    def _claim(self):
        self.agent.driver.build_migrate_info.return_value = \
            objects.NUMAMigrateInfo(cell_pins={0: {1}})
        self.agent.compute_api.check_can_live_migrate_source.side_effect = \
            _source_answers()
        migration_dest.check_destination(
            self.agent, None, self.inst, cbase.SOURCE, self.migration.uuid,
            migration=self.migration)
        self.agent.conductor_api.reset_mock()

    def _rollback(self):
        self.agent.flows.rollback_at_destination(self.agent, None,
                                                 self.inst, self.migration)

    def test_old_agent_drops_nothing(self):
        self.agent = cbase.as_release(self.agent, new=False)
        self._rollback()
        self.agent.conductor_api.migration_context_drop.assert_not_called()
        self.assertEqual('', self.logs.output)

    def test_new_agent_without_claim_takes_the_old_path(self):
        self._rollback()
        self.agent.conductor_api.migration_context_drop.assert_called_once_with(
            None, self.inst.uuid, self.migration.uuid,
            dest_host=self.agent.host)
        self.assertTrue(self.old_path_logged(releases.OLD_PATH_DEST_DROP))

    def test_new_agent_with_claim_drops_it_without_old_path(self):
        self._claim()
        self._rollback()
        self.assertEqual([], self.agent.tracker.claims())
        self.agent.conductor_api.migration_context_drop.assert_called_once()
        self.assertFalse(self.old_path_logged(releases.OLD_PATH_DEST_DROP))


class SourceAnswerTest(AgentTestCase):
    """The source answers in the version the destination spoke."""

    # An old agent is never sent 1.1 (its server refuses it).
    scenarios = [
        ('new-agent-dest-1.0', {'new': True, 'dest_version': '1.0'}),
        ('new-agent-dest-1.1', {'new': True, 'dest_version': '1.1'}),
        ('old-agent-dest-1.0', {'new': False, 'dest_version': '1.0'}),
    ]

    def test_answer(self):
        agent = cbase.agent(host=cbase.SOURCE)
        agent = cbase.as_release(agent, new=self.new)
        agent.driver.list_guests.return_value = {self.inst.uuid: 'g'}
        dest_check_data = samples.live_migrate_data()
        dest_check_data.src_supports_numa_live_migration = False
        sent = releases.backported(dest_check_data, self.dest_version)
        answer = agent.flows.check_source(agent, None, self.inst, sent)
        self.assertEqual(self.dest_version, answer.VERSION)
        wire = rpc.primitive_for(answer)['numamig_object.data']
        keeps_flag = self.new and self.dest_version == '1.1'
        self.assertEqual(keeps_flag,
                         wire.get('src_supports_numa_live_migration', False))


class SourceOldPathTest(AgentTestCase):
    """Only new code logs its old-path decisions."""

    scenarios = RELEASES

    def test_copied_xml_and_kept_usage(self):
        agent = cbase.agent(host=cbase.SOURCE,
                            instances=[self.inst.obj_clone()])
        agent = cbase.as_release(agent, new=self.new)
        self.inst.host = cbase.SOURCE
        agent.conductor_api.migration_set_status.side_effect = \
            lambda ctxt, uuid, status, **kw: self.migration
        agent.compute_api.pre_live_migration.side_effect = \
            lambda ctxt, instance, data, **kw: data
        agent.driver.get_destination_xml.return_value = '<domain/>'
        data = releases.backported(samples.live_migrate_data(), '1.0')
        migration_source.SourceMigration(agent, None, self.inst,
                                         self.migration, data).run()
        agent.driver.get_destination_xml.assert_called_once_with(
            self.inst.uuid, None)
        self.assertEqual({self.inst.uuid}, agent.tracker.instance_uuids())
        for item in (releases.OLD_PATH_XML, releases.OLD_PATH_SOURCE_DROP):
            self.assertEqual(self.new, self.old_path_logged(item), item)


class ComputeAPIVersionsTest(base.TestCase):
    """The version of each message comes from what the sender knows."""

    def setUp(self):
        super().setUp()
        self.useFixture(fixtures.MockPatch(
            'numamig.rpc.get_client',
            side_effect=lambda *a, version_cap, **kw: mock.Mock(
                name=f'client-{version_cap}')))
        self.api = compute_rpcapi.ComputeAPI(mock.sentinel.transport)
        # One client per release's API version.
        self.assertEqual(
            {'1.0': 'client-1.0', '1.1': 'client-1.1'},
            {v: c._extract_mock_name()
             for v, c in self.api._clients.items()})
        self._client_1_0 = self.api._clients['1.0']
        self._client_1_1 = self.api._clients['1.1']
        for client in self.api._clients.values():
            client.can_send_version.return_value = True
        self.inst = cbase.instance()
        self.migration = cbase.migration(self.inst)

    def _prepared(self, client):
        return [c.kwargs['version'] for c in client.prepare.call_args_list]

    def test_old_destination_gets_1_0_at_once(self):
        # Its reported service version (1) serves compute API 1.0: the
        # check goes there, without the claim parameters, in one send.
        self.api.peer_versions = {'dst': 1}.get
        self.api.check_can_live_migrate_destination(
            None, self.inst, 'dst', self.migration, None)
        self.assertEqual([], self._prepared(self._client_1_1))
        self.assertEqual(['1.0'], self._prepared(self._client_1_0))
        kwargs = self._client_1_0.prepare.return_value.call.call_args[1]
        self.assertNotIn('migration', kwargs)
        self.assertNotIn('limits', kwargs)

    def test_virtio_mem_guest_is_not_sent_to_an_old_destination(self):
        # Backported to 1.0, the guest would arrive without its devices:
        # the old agent's refusal is raised, nothing is sent again.
        self.inst = cbase.instance(pins={0: 2, 1: 3})
        cell = self.inst.numa_topology.cells[0]
        cell.virtio_mem_size_mb = 512
        cell.virtio_mem_block_kb = 2048
        cell.virtio_mem_requested_mb = 512
        self.api.peer_versions = {'dst': 1}.get
        self.assertRaises(messaging.UnsupportedVersion,
                          self.api.check_can_live_migrate_destination,
                          None, self.inst, 'dst', self.migration, None)
        for version in ('1.0', '1.1'):
            self.assertEqual([], self._prepared(self.api._clients[version]),
                             version)

    def test_other_errors_are_not_retried(self):
        self._client_1_1.prepare.return_value.call.side_effect = \
            messaging.MessagingTimeout()
        self.assertRaises(messaging.MessagingTimeout,
                          self.api.check_can_live_migrate_destination,
                          None, self.inst, 'dst', self.migration, None)
        self._client_1_0.prepare.assert_not_called()

    def test_capped_client_sends_1_0_without_trying(self):
        self.api.client.can_send_version.return_value = False
        self.api.check_can_live_migrate_destination(
            None, self.inst, 'dst', self.migration, None)
        self.assertEqual(['1.0'], self._prepared(self._client_1_0))
        self.api.client.prepare.assert_not_called()

    def test_cast_follows_the_object_version(self):
        # Each goes at the API version carrying its LiveMigrateData, by
        # the client backporting to that version's objects.
        # (LiveMigrateData 1.0 is release 1's, 1.1 release 2's.)
        for version in ('1.0', '1.1'):
            self.api.live_migration(
                None, self.inst, self.migration,
                releases.backported(samples.live_migrate_data(), version))
        self.assertEqual(['1.0'], self._prepared(self._client_1_0))
        self.assertEqual(['1.1'], self._prepared(self._client_1_1))

    def test_an_old_destination_has_nothing_to_drop(self):
        # Its reported service version serves 1.0: nothing is sent.
        self.api.peer_versions = {self.migration.dest_host: 1}.get
        self.assertFalse(self.api.drop_move_claim_at_destination(
            None, self.inst, self.migration))
        for client in self.api._clients.values():
            client.prepare.assert_not_called()
