"""A compute agent's metric families, from its own tracker."""

from numamig.compute import metrics
from tests import base
from tests.unit.compute import base as cbase
from tests.unit.conductor import test_metrics as conductor_test


class AgentCollectorTest(base.TestCase):

    def test_cells_guests_claims_and_outgoing(self):
        guest = cbase.instance(host=cbase.HOST, pins={0: 1, 1: 9})
        claimed = cbase.instance(host='elsewhere', pins={0: 3})
        manager = cbase.manager(instances=[guest])
        manager.tracker.add_claim(self._claim(manager, claimed))
        found = conductor_test.Registry(
            metrics.AgentCollector(manager)).samples()
        pinned = cbase.pinned(manager.tracker.usage_topology())

        def pcpus(cell, state):
            return found[('numamig_agent_cell_pcpus',
                          (('cell', str(cell)), ('state', state)))]
        self.assertEqual(len(pinned), pcpus(0, 'pinned') + pcpus(1, 'pinned'))
        # The guest's pCPUs 1 and 9 and the claim's 3 (siblings 1/9
        # and 3/11 are cell 0's).
        self.assertEqual(3.0, pcpus(0, 'pinned'))
        self.assertEqual(16 - len(pinned),
                         pcpus(0, 'free') + pcpus(1, 'free'))
        self.assertEqual(1.0, found[('numamig_agent_guests', ())])
        self.assertEqual(1.0, found[('numamig_agent_move_claims', ())])
        self.assertEqual(0.0, found[
            ('numamig_agent_outgoing_migrations', ())])

    def test_refused_move_claims_by_reason(self):
        from numamig import exception
        from numamig.compute import claims
        manager = cbase.manager()
        # Wider than any host cell's dedicated pCPUs (8 per cell).
        wide = cbase.instance(host='elsewhere', vcpus=12,
                              pins={v: v for v in range(12)})
        migration = cbase.migration(wide)
        self.assertRaises(exception.MigrationPreCheckError,
                          claims.move_claim, manager.tracker,
                          manager.agent.conductor_api, None, wide,
                          migration, None, persist=False)
        found = conductor_test.Registry(
            metrics.AgentCollector(manager)).samples()
        self.assertEqual(1.0, found[
            ('numamig_agent_move_claims_refused_total', ())])
        reasons = {dict(labels)['reason']: value for (name, labels), value
                   in found.items()
                   if name == 'numamig_agent_move_claim_refusal_reasons_total'}
        self.assertEqual(set(metrics.REFUSAL_REASONS), set(reasons))
        self.assertEqual(1.0, reasons['dedicated-pcpus'])
        self.assertEqual(0.0, reasons['huge-pages'])

    def test_virtio_mem_per_host_node(self):
        guest = cbase.instance(host=cbase.HOST, pins={0: 1, 1: 9})
        cell = guest.numa_topology.cells[0]
        cell.virtio_mem_size_mb = 1024
        cell.virtio_mem_block_kb = 2048
        cell.virtio_mem_requested_mb = 256
        cell.virtio_mem_current_mb = 256
        manager = cbase.manager(instances=[guest])
        found = conductor_test.Registry(
            metrics.AgentCollector(manager)).samples()
        node = (('node', str(cell.host_cell)),)
        self.assertEqual(256 * 2**20, found[
            ('numamig_agent_virtio_mem_reclaimable_bytes', node)])
        self.assertEqual((1024 - 256) * 2**20, found[
            ('numamig_agent_virtio_mem_growable_bytes', node)])
        self.assertEqual(1, sum(1 for name, _labels in found
                                if name.startswith('numamig_agent_virtio')
                                and name.endswith('reclaimable_bytes')))

    def test_guard_decisions_and_state(self):
        from numamig.compute import events
        manager = cbase.manager()
        manager.driver.migration_guard_state.return_value = 'on'
        found = conductor_test.Registry(
            metrics.AgentCollector(manager)).samples()
        self.assertEqual(0.0, found[('numamig_agent_guard_decisions_total',
                                     (('decision', 'refused'),))])
        entry = events.GuardDecision('h', 'g', 'u', 'refused', 'r', 'at')
        manager.driver.read_guard_log.return_value = ([entry], None)
        found = conductor_test.Registry(
            metrics.AgentCollector(manager)).samples()
        self.assertEqual(1.0, found[('numamig_agent_guard_decisions_total',
                                     (('decision', 'refused'),))])
        self.assertEqual(0.0, found[('numamig_agent_guard_decisions_total',
                                     (('decision', 'rewritten'),))])
        self.assertEqual(1.0, found[('numamig_agent_migration_guard',
                                     (('state', 'on'),))])
        self.assertEqual(0.0, found[('numamig_agent_migration_guard',
                                     (('state', 'failed'),))])

    def _claim(self, manager, instance):
        from numamig.compute import resource_tracker
        return resource_tracker.MoveClaim(
            instance.uuid, 'demo', cbase.new_uuid(),
            instance.numa_topology)


class AuditCollectorTest(base.TestCase):
    """The agent's pin audit of its own domains, by kind."""

    def _guest(self, pcpus, host_cell=0):
        from tests.unit.cmd import cli_base
        from tests.unit.db import base as db_base
        instance = cli_base.make_instance('h1', uuid=db_base.new_uuid())
        instance.numa_topology.cells[0].cpu_pinning = dict(enumerate(pcpus))
        instance.numa_topology.cells[0].host_cell = host_cell
        return instance, cli_base.domain_xml(instance)

    def _findings(self, recorded, domains):
        """``recorded`` Instances counted here; ``domains`` {uuid: (name,
        xml)} libvirt lists."""
        from tests.unit.db import base as db_base
        manager = cbase.manager(
            host='h1', topology=db_base.make_host_topology(),
            instances=recorded,
            guests={uuid: name for uuid, (name, _x) in domains.items()})
        manager.driver.get_domain_xml.side_effect = \
            lambda uuid, persistent=False: domains[uuid][1]
        found = conductor_test.Registry(
            metrics.AuditCollector(manager)).samples()
        return {dict(labels)['kind']: value for (name, labels), value
                in found.items() if name == 'numamig_agent_audit_findings'}

    def test_a_clean_host_shows_every_kind_at_zero(self):
        one, one_xml = self._guest([2, 3])
        two, two_xml = self._guest([6, 7], host_cell=1)
        found = self._findings([one, two], {one.uuid: (one.name, one_xml),
                                            two.uuid: (two.name, two_xml)})
        self.assertEqual(dict.fromkeys(metrics.AUDIT_KINDS, 0.0), found)

    def test_a_guest_nobody_recorded_pinned_onto_a_counted_guest(self):
        from numamig.audit import pins
        one, one_xml = self._guest([2, 3])
        stray, stray_xml = self._guest([3, 2])
        found = self._findings([one], {one.uuid: (one.name, one_xml),
                                       stray.uuid: (stray.name, stray_xml)})
        self.assertEqual(1.0, found[pins.SHARED_PCPU])
        self.assertEqual(1.0, sum(found.values()))

    def test_a_counted_guest_without_a_domain(self):
        from numamig.audit import pins
        one, _xml = self._guest([2, 3])
        found = self._findings([one], {})
        self.assertEqual(1.0, found[pins.MISSING_DOMAIN])
        self.assertEqual(1.0, sum(found.values()))
