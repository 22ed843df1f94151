"""Tests of numamig.compute.cpu_power and the tracker's use of it.

The host (tests.unit.compute.base): two cells, 0-3 with their SMT
siblings 8-11, and 4-7 with 12-15, every pCPU dedicated; power management
may touch 1-15, never CPU 0. The sysfs tree is a fake one
(tests.fixtures.sysfs_cpus) the agent writes for real.
"""

from unittest import mock

from numamig import exception
from numamig.compute import claims
from numamig.compute import cpu_power
from numamig.compute import metrics
from numamig.compute import report
from numamig.compute import settings as compute_settings
from tests import base
from tests.fixtures import sysfs_cpus
from tests.unit.compute import base as cbase

DEDICATED = '0-15'
MANAGED = set(range(1, 16))
CELL0 = {0, 1, 2, 3, 8, 9, 10, 11}
CELL1 = {4, 5, 6, 7, 12, 13, 14, 15}


class PlanTest(base.TestCase):
    """The pure part: which managed pCPUs go up, which down."""

    def test_cpu0_and_cpus_outside_the_dedicated_set_are_never_managed(self):
        topology = cbase.host_topology()
        wanted = cpu_power.plan(topology, {0, 1, 2, 9, 12})
        self.assertEqual({0: {1, 2, 9}, 1: {12}}, wanted.down)
        self.assertEqual({0: set(), 1: set()}, wanted.up)

    def test_pinned_pcpus_go_up_the_rest_down(self):
        topology = cbase.host_topology()
        topology.cells[0].pinned_cpus = {0, 3, 8}
        wanted = cpu_power.plan(topology, set(range(16)))
        self.assertEqual({3, 8}, wanted.up[0])
        self.assertEqual(CELL0 - {0, 3, 8}, wanted.down[0])
        self.assertEqual(CELL1, wanted.down[1])

    def test_pinned_pcpus_of_a_topology_include_emulator_threads(self):
        inst = cbase.instance(pins={0: 2, 1: 10})
        inst.numa_topology.cells[0].cpuset_reserved = {5}
        self.assertEqual({2, 5, 10},
                         cpu_power.pinned_pcpus(inst.numa_topology))
        self.assertEqual(set(), cpu_power.pinned_pcpus(None))


class _PowerBase(base.TestCase):

    strategy = 'cpu_state'
    governors = None

    def setUp(self):
        super().setUp()
        self.sysfs = self.useFixture(sysfs_cpus.SysfsCPUs(
            16, governors=self.governors, offline_cpu0=True))
        self.flags(group='compute', cpu_dedicated_set=DEDICATED,
                   cpu_shared_set='1', cpu_power_management=True,
                   cpu_power_management_strategy=self.strategy,
                   cpu_power_sysfs_root=self.sysfs.root)

    def manager(self, **kwargs):
        return cbase.manager(**kwargs)

    def claim(self, manager, inst, migration=None):
        migration = migration or cbase.migration(inst)
        return claims.move_claim(manager.tracker, manager.conductor_api,
                                 None, inst, migration, None), migration


class CPUStateTest(_PowerBase):
    """Strategy cpu_state: unused dedicated pCPUs offline."""

    def test_start_takes_every_unused_managed_pcpu_offline(self):
        here = cbase.instance(host=cbase.HOST, pins={0: 2, 1: 10})
        manager = self.manager(instances=[here])
        self.assertEqual(MANAGED - {2, 10}, self.sysfs.offline())
        state = manager.cpu_power.state()
        self.assertEqual('cpu_state', state.strategy)
        self.assertEqual({0: CELL0 - {0, 2, 10}, 1: CELL1},
                         {c.id: c.powered_down for c in state.cells})
        self.assertEqual({0: CELL0 - {0}, 1: CELL1},
                         {c.id: c.managed for c in state.cells})

    def test_start_powers_up_what_recorded_guests_and_claims_pin(self):
        # A crash left pCPUs of a guest and of a claim offline.
        for cpu in (2, 3, 10):
            self.sysfs.set_online(cpu, False)
        here = cbase.instance(host=cbase.HOST, pins={0: 2, 1: 10})
        moving = cbase.instance(pins={0: 3})
        moving.migration_context = claims.context_of(
            mock.Mock(host=cbase.HOST), moving, mock.Mock(
                migration_uuid=cbase.new_uuid(),
                topology=cbase.instance(host=cbase.HOST,
                                        pins={0: 3}).numa_topology))
        self.manager(instances=[here], claimed=[moving])
        self.assertEqual(MANAGED - {2, 3, 10}, self.sysfs.offline())

    def test_move_claim_powers_up_its_pcpus_before_it_is_recorded(self):
        manager = self.manager()
        self.assertEqual(MANAGED, self.sysfs.offline())
        seen = []
        manager.conductor_api.migration_context_set.side_effect = \
            lambda ctxt, context: seen.append(set(self.sysfs.offline()))
        claim, _migration = self.claim(manager,
                                       cbase.instance(pins={0: 0, 1: 8}))
        pins = cpu_power.pinned_pcpus(claim.topology)
        self.assertEqual(2, len(pins))
        self.assertEqual([MANAGED - pins], seen)
        self.assertEqual(MANAGED - pins, self.sysfs.offline())

    def test_rollback_powers_the_claims_pcpus_down_once(self):
        manager = self.manager()
        claim, migration = self.claim(manager, cbase.instance(pins={0: 0}))
        downs = manager.cpu_power.powered_down_total
        manager.tracker.drop_move_claim(migration.uuid)
        self.assertEqual(MANAGED, self.sysfs.offline())
        self.assertEqual(downs + 1, manager.cpu_power.powered_down_total)
        # Redelivered: nothing more is written.
        manager.tracker.drop_move_claim(migration.uuid)
        self.assertEqual(downs + 1, manager.cpu_power.powered_down_total)

    def test_redelivered_claim_writes_nothing_more(self):
        manager = self.manager()
        inst = cbase.instance(pins={0: 0})
        claim, migration = self.claim(manager, inst)
        ups = manager.cpu_power.powered_up_total
        again, _ = self.claim(manager, inst, migration)
        self.assertIs(claim, again)
        self.assertEqual(ups, manager.cpu_power.powered_up_total)

    def test_arrival_keeps_them_up_and_leaving_powers_the_source_down(self):
        manager = self.manager()
        inst = cbase.instance(pins={0: 0})
        claim, migration = self.claim(manager, inst)
        pins = cpu_power.pinned_pcpus(claim.topology)
        arrived = inst.obj_clone()
        arrived.host = cbase.HOST
        arrived.numa_topology = claim.topology
        manager.tracker.apply_move_claim(migration.uuid, arrived)
        self.assertEqual(MANAGED - pins, self.sysfs.offline())
        # The guest leaves this host (as a source, completed).
        self.assertTrue(manager.tracker.drop_instance(inst.uuid))
        self.assertEqual(MANAGED, self.sysfs.offline())
        self.assertFalse(manager.tracker.drop_instance(inst.uuid))
        self.assertEqual(MANAGED, self.sysfs.offline())

    def test_a_claim_whose_pcpus_stay_down_is_refused_and_undone(self):
        manager = self.manager()
        real = manager.cpu_power.sysfs.set_online

        def refuse(cpu, online):
            if online:
                raise PermissionError(13, 'Permission denied')
            real(cpu, online)
        manager.cpu_power.sysfs.set_online = refuse
        exc = self.assertRaises(
            exception.MigrationPreCheckError, self.claim, manager,
            cbase.instance(pins={0: 0}))
        self.assertIn('could not be powered up', str(exc))
        self.assertEqual([], manager.tracker.claims())
        self.assertEqual(MANAGED, self.sysfs.offline())
        self.assertEqual(set(), cbase.pinned(
            manager.tracker.usage_topology()))
        manager.conductor_api.migration_context_set.assert_not_called()

    def test_a_pcpu_that_will_not_go_down_is_reported_failed(self):
        self.sysfs.set_online(5, True)
        manager = self.manager()
        real = manager.cpu_power.sysfs.set_online

        def refuse(cpu, online):
            if cpu == 5:
                raise OSError(16, 'Device or resource busy')
            real(cpu, online)
        manager.cpu_power.sysfs.set_online = refuse
        self.sysfs.set_online(5, True)
        manager.tracker.update_available_resource(None)
        state = manager.cpu_power.state()
        self.assertEqual({5}, state.failed)
        self.assertNotIn(5, state.cells[1].powered_down)
        self.assertIn(6, state.cells[1].powered_down)
        self.assertGreater(manager.cpu_power.failures_total, 0)

    def test_instance_claim_powers_up_or_refuses(self):
        manager = self.manager()
        new = cbase.instance(host=None)
        placed = claims.instance_claim(manager.tracker, new, None)
        pins = cpu_power.pinned_pcpus(placed.numa_topology)
        self.assertEqual(MANAGED - pins, self.sysfs.offline())

    def test_report_carries_the_state_and_metrics_count_it(self):
        manager = self.manager()
        claim, _ = self.claim(manager, cbase.instance(pins={0: 0, 1: 1}))
        up = cpu_power.pinned_pcpus(claim.topology) & MANAGED
        sent = report.build(manager.agent)
        sent.validate()
        self.assertEqual(
            len(MANAGED - up),
            sum(len(c.powered_down) for c in sent.cpu_power.cells))
        families = {f.name: f for f in
                    metrics.AgentCollector(manager).families()}
        down = families['numamig_agent_cpus_powered_down'].samples
        self.assertEqual(len(MANAGED - up), sum(s.value for s in down))
        changes = {s.labels['change']: s.value for s in
                   families['numamig_agent_cpu_power_changes'].samples}
        self.assertEqual(len(up), changes['up'])
        self.assertEqual(len(MANAGED), changes['down'])
        self.assertEqual(0, changes['failed'])


class GovernorTest(_PowerBase):
    """Strategy governor: unused dedicated pCPUs on the low governor."""

    strategy = 'governor'
    governors = ['performance', 'powersave', 'schedutil']

    def test_unused_low_used_high_all_online(self):
        manager = self.manager()
        claim, migration = self.claim(manager, cbase.instance(pins={0: 0}))
        pins = cpu_power.pinned_pcpus(claim.topology)
        self.assertEqual(MANAGED - pins, self.sysfs.on_governor('powersave'))
        self.assertEqual(set(), self.sysfs.offline())
        self.assertEqual('powersave', manager.cpu_power.state().governor_low)
        manager.tracker.drop_move_claim(migration.uuid)
        self.assertEqual(MANAGED, self.sysfs.on_governor('powersave'))
        # CPU 0 kept its own.
        self.assertEqual({0}, self.sysfs.on_governor('performance'))

    def test_a_governor_the_pcpu_lacks_is_a_failure_not_a_write(self):
        self.flags(group='compute', cpu_power_governor_low='conservative')
        manager = self.manager()
        self.assertEqual(MANAGED, manager.cpu_power.state().failed)
        self.assertEqual(set(), self.sysfs.on_governor('conservative'))
        # A claim still succeeds: its pCPUs run at the governor they have.
        self.claim(manager, cbase.instance(pins={0: 0}))


class NoCpufreqTest(_PowerBase):
    strategy = 'governor'
    governors = None

    def test_without_cpufreq_nothing_goes_down_and_claims_succeed(self):
        manager = self.manager()
        self.assertEqual(MANAGED, manager.cpu_power.state().failed)
        self.claim(manager, cbase.instance(pins={0: 0}))


class OffTest(base.TestCase):

    def test_off_writes_nothing_and_reports_off(self):
        sysfs = self.useFixture(sysfs_cpus.SysfsCPUs(16))
        self.flags(group='compute', cpu_dedicated_set=DEDICATED,
                   cpu_power_sysfs_root=sysfs.root)
        manager = cbase.manager()
        claims.move_claim(manager.tracker, manager.conductor_api, None,
                          cbase.instance(pins={0: 0}),
                          cbase.migration(cbase.instance()), None)
        self.assertEqual(set(), sysfs.offline())
        state = manager.cpu_power.state()
        self.assertEqual(('off', []), (state.strategy, state.cells))


class SysfsTest(base.TestCase):

    def test_cpu0_without_an_online_file_is_always_online(self):
        sysfs = self.useFixture(sysfs_cpus.SysfsCPUs(4))
        cpus = cpu_power.SysfsCPUs(sysfs.root)
        self.assertFalse(cpus.can_offline(0))
        self.assertTrue(cpus.online(0))
        self.assertTrue(cpus.can_offline(1))

    def test_out_of_range_ids_are_refused(self):
        cpus = cpu_power.SysfsCPUs('/nonexistent')
        self.assertRaises(exception.CPUPowerError, cpus.online, -1)
        self.assertRaises(exception.CPUPowerError, cpus.online,
                          cpu_power.MAX_CPU_ID + 1)

    def test_a_pcpu_the_kernel_cannot_offline_is_reported(self):
        sysfs = self.useFixture(sysfs_cpus.SysfsCPUs(4))
        settings = compute_settings.CPUPowerSettings(
            strategy='cpu_state', cpu_dedicated_set='0-3',
            governor_low='powersave', governor_high='performance',
            sysfs_root=sysfs.root)
        import os
        os.remove(os.path.join(sysfs.root, 'cpu3', 'online'))
        power = cpu_power.CPUPower('h', settings)
        topology = cbase.host_topology(cells=1, cores=2, threads=2)
        power.apply(topology)
        self.assertEqual({1, 2}, sysfs.offline())
        self.assertEqual({3}, power.state().failed)
