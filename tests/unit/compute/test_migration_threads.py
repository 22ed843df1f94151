"""Tests of numamig.compute.migration_threads: each agent chooses the
CPUs for the migration's threads on its host and reports where they ran."""

from numamig import objects
from numamig.compute import migration_dest
from numamig.compute import migration_threads
from numamig.numa import migration_cpus
from tests import base
from tests.unit.compute import base as cbase
from tests.unit.compute import test_migration_dest as tmd

# Two nodes, one shared core each: node 0 shares {0, 8}, node 1 {4, 12}.
TOPOLOGY = {'shared': 1}


class SourceTest(base.TestCase):

    def test_shared_cpus_of_the_guest_node_and_the_record_sent(self):
        inst = cbase.instance(pins={0: 5, 1: 13}, host_cell=1)
        agent = cbase.agent(host=cbase.SOURCE, instances=[inst],
                            topology=cbase.host_topology(**TOPOLOGY))
        threads = migration_threads.for_source(agent, 'ctxt', inst, 'm-1')
        self.assertEqual((frozenset({4, 12}), migration_cpus.GUEST_NODES),
                         (threads.cpus, threads.basis))
        record = {'host': cbase.SOURCE, 'basis': threads.basis,
                  'cpus': [4, 12], 'connections': 2, 'threads': {}}
        threads.report(record)
        agent.conductor_api.migration_record_threads.assert_called_once_with(
            'ctxt', 'm-1', 'source', record)

    def test_the_operator_set_wins_but_never_a_pinned_cpu(self):
        inst = cbase.instance(pins={0: 5, 1: 13}, host_cell=1)
        agent = cbase.agent(host=cbase.SOURCE, instances=[inst],
                            topology=cbase.host_topology(**TOPOLOGY))
        agent.driver.migration_housekeeping_cpus.return_value = \
            frozenset({5, 6})
        threads = migration_threads.for_source(agent, 'ctxt', inst, 'm-1')
        self.assertEqual((frozenset({6}), migration_cpus.HOUSEKEEPING),
                         (threads.cpus, threads.basis))

    def test_a_capped_conductor_is_not_told(self):
        inst = cbase.instance(pins={0: 5, 1: 13}, host_cell=1)
        agent = cbase.agent(host=cbase.SOURCE, instances=[inst])
        agent.conductor_api.migration_record_threads.return_value = False
        threads = migration_threads.for_source(agent, 'ctxt', inst, 'm-1')
        with self.assertLogs('numamig.compute.migration_threads',
                             'INFO') as logs:
            threads.report({'host': 'x'})
        self.assertIn("release 1's API", logs.output[-1])


class DestinationTest(base.TestCase):

    def setUp(self):
        super().setUp()
        self.agent = cbase.agent(topology=cbase.host_topology(**TOPOLOGY))
        self.agent.driver.supports_native_migration = True
        self.agent.driver.build_migrate_info.return_value = \
            objects.NUMAMigrateInfo(cell_pins={0: {1}})
        self.agent.compute_api.check_can_live_migrate_source.side_effect = \
            tmd._source_answers(True)
        self.inst = cbase.instance(pins={0: 2, 1: 10})
        self.migration = cbase.migration(self.inst)
        self.data = migration_dest.check_destination(
            self.agent, 'ctxt', self.inst, cbase.SOURCE, self.migration.uuid,
            migration=self.migration)
        self.claim = self.agent.tracker.get_claim(self.migration.uuid)
        self.watch = self.agent.driver.watch_incoming_migration.return_value

    def test_watch_started_once_with_the_claim_nodes_cpus(self):
        for _ in range(2):  # a repeated pre_live_migration
            migration_dest.pre_live_migration(self.agent, 'ctxt', self.inst,
                                              self.data)
        (uuid, chosen, memory_mb, _ended), = [
            c.args for c in
            self.agent.driver.watch_incoming_migration.call_args_list]
        node = self.claim.topology.cells[0].host_cell
        shared = {0: {0, 8}, 1: {4, 12}}[node]
        self.assertEqual((self.inst.uuid, (frozenset(shared),
                                           migration_cpus.GUEST_NODES),
                          1024), (uuid, chosen, memory_mb))
        self.assertEqual(1, len(self.agent.thread_watches))

    def test_arrival_stops_the_watch_whose_end_is_recorded(self):
        migration_dest.pre_live_migration(self.agent, 'ctxt', self.inst,
                                          self.data)
        ended = self.agent.driver.watch_incoming_migration.call_args.args[3]
        self.agent.driver.list_guests.return_value = {self.inst.uuid: 'g'}
        self.agent.conductor_api.migration_context_apply.return_value = \
            self.inst
        migration_dest.post_at_destination(self.agent, 'ctxt', self.inst,
                                           self.migration)
        self.watch.stop.assert_called_once_with()
        self.assertEqual(0, len(self.agent.thread_watches))
        # The watch hands its record over from its thread.
        record = {'host': cbase.HOST, 'basis': 'none', 'cpus': [],
                  'connections': None, 'threads': {'multifdrecv_0': [1]}}
        ended(record)
        self.agent.conductor_api.migration_record_threads.assert_called_with(
            'ctxt', self.migration.uuid, 'dest', record)

    def test_rollback_stops_the_watch(self):
        migration_dest.pre_live_migration(self.agent, 'ctxt', self.inst,
                                          self.data)
        migration_dest.rollback_at_destination(self.agent, 'ctxt',
                                               self.inst, self.migration)
        self.watch.stop.assert_called_once_with()
        self.assertEqual(0, len(self.agent.thread_watches))

    def test_a_watch_that_ended_by_itself_is_forgotten(self):
        migration_dest.pre_live_migration(self.agent, 'ctxt', self.inst,
                                          self.data)
        ended = self.agent.driver.watch_incoming_migration.call_args.args[3]
        ended({'host': cbase.HOST, 'basis': 'none', 'cpus': [],
               'connections': None, 'threads': {}})
        self.assertEqual(0, len(self.agent.thread_watches))
        migration_dest.rollback_at_destination(self.agent, 'ctxt',
                                               self.inst, self.migration)
        self.watch.stop.assert_not_called()

    def test_no_watch_for_an_emulated_migration(self):
        self.agent.driver.supports_native_migration = False
        migration_dest.pre_live_migration(self.agent, 'ctxt', self.inst,
                                          self.data)
        self.agent.driver.watch_incoming_migration.assert_not_called()
