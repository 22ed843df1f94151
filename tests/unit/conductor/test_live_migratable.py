"""The conductor's standing live-migratable answer (a conductor on SQLite,
hosts reporting through it as agents would)."""

from numamig import cpumodel
from numamig import objects
from numamig.conductor import live_migratable
from numamig.conductor import metrics as conductor_metrics
from numamig.db import compute_nodes
from numamig.db import instances
from numamig.db import live_migratable as answers
from numamig.numa import constraints
from numamig.numa import fit
from numamig.numa import usage
from tests.unit.compute import base as cbase
from tests.unit.conductor import base

# A guest's CPU that needs pku, and hosts' CPUs with and without it.
NEEDS_PKU = cpumodel.GuestCPU('host-passthrough', 'Icelake-Server',
                              frozenset({'avx512f', 'pku'}))


def _host_cpu(pku):
    return objects.HostCPU(model='Icelake-Server',
                           features=['avx512f', 'pku'] if pku
                           else ['avx512f'])


class LiveMigratableWatchTestCase(base.ConductorTestCase):
    """src holds the guests; dst1-dst3 are empty 2-cell hosts of 8
    pCPUs per cell (cbase.host_topology)."""

    def setUp(self):
        super().setUp()
        # No round-robin sweep: a look examines whole only what changed.
        self.watch = live_migratable.LiveMigratableWatch(self.worker,
                                                         sweep=0)

    def _guest(self, vcpus=2, host='src'):
        inst = cbase.instance(host=host, vcpus=vcpus,
                              pins={n: n for n in range(vcpus)})
        instances.create(self.db, inst)
        return inst

    def _answers(self, *guests):
        found = answers.get_many(self.db, [g.uuid for g in guests])
        return [found[g.uuid]['status'] if g.uuid in found else None
                for g in guests]

    def _fill(self, host):
        """dst host: every pCPU pinned, as its report would say."""
        topology = cbase.host_topology()
        request = constraints.get_numa_request(
            8, 1024, {'hw:cpu_policy': 'dedicated'}, {})
        for _ in range(2):
            topology = usage.apply(topology,
                                   fit.fit(topology, request).topology)
        self.report(host, topology=topology)

    def test_guests_that_fit_are_yes_with_a_witness(self):
        guest = self._guest()
        changes = self.watch.look()
        self.assertEqual([guest.uuid], [uuid for uuid, _, _ in changes])
        row = answers.get_many(self.db, [guest.uuid])[guest.uuid]
        self.assertEqual(('yes', []), (row['status'], row['reasons']))
        self.assertIn(row['witness'], ('dst1', 'dst2', 'dst3'))
        # Nothing changed: the next look examines no guest whole.
        assessed = self.watch.tracker.assessed
        self.assertEqual([], self.watch.look())
        self.assertEqual(assessed, self.watch.tracker.assessed)

    def test_too_big_for_every_host_is_no_with_the_closest_miss(self):
        guest = self._guest(vcpus=12)
        self.watch.look()
        row = answers.get_many(self.db, [guest.uuid])[guest.uuid]
        self.assertEqual('no', row['status'])
        [reason] = row['reasons']
        self.assertEqual('no-host-fits', reason['kind'])
        self.assertIn('pCPUs', reason['detail'])

    def test_maintenance_degrades_and_its_end_restores(self):
        guest = self._guest()
        self.watch.look()
        for host in ('dst1', 'dst2', 'dst3'):
            compute_nodes.set_disabled(self.db, host, 'firmware')
        self.watch.look()
        row = answers.get_many(self.db, [guest.uuid])[guest.uuid]
        self.assertEqual(('degraded', 'only-maintenance'),
                         (row['status'], row['reasons'][0]['kind']))
        compute_nodes.set_enabled(self.db, 'dst2')
        self.watch.look()
        row = answers.get_many(self.db, [guest.uuid])[guest.uuid]
        self.assertEqual(('yes', 'dst2'), (row['status'], row['witness']))

    def test_hosts_filling_up_turn_it_to_no(self):
        guest = self._guest(vcpus=4)
        self.watch.look()
        for host in ('dst1', 'dst2', 'dst3'):
            self._fill(host)
        self.watch.look()
        self.assertEqual(['no'], self._answers(guest))

    def test_a_deleted_guest_is_forgotten(self):
        guest = self._guest()
        self.watch.look()
        instances.destroy(self.db, guest.uuid)
        self.watch.look()
        self.assertEqual([None], self._answers(guest))

    def test_devices_the_guest_may_not_unplug_make_it_no(self):
        held = cbase.instance(
            host='src', vcpus=2, pins={0: 0, 1: 1},
            extra_specs={'hw:cpu_policy': 'dedicated',
                         'numamig:device_migration': 'refuse'})
        held.numa_topology.pci_devices = [objects.InstancePCIDevice(
            alias='vf', address='0000:82:00.1', host_node=0, guest_cell=0)]
        unplugged = cbase.instance(host='src', vcpus=2, pins={0: 2, 1: 3})
        unplugged.numa_topology.pci_devices = [objects.InstancePCIDevice(
            alias='vf', address='0000:82:00.2', host_node=0, guest_cell=0)]
        for inst in (held, unplugged):
            instances.create(self.db, inst)
        self.watch.look()
        row = answers.get_many(self.db, [held.uuid])[held.uuid]
        self.assertEqual(('no', 'devices'),
                         (row['status'], row['reasons'][0]['kind']))
        self.assertIn('0000:82:00.1', row['reasons'][0]['detail'])
        self.assertEqual(['yes'], self._answers(unplugged))

    def _reason(self, guest):
        row = answers.get_many(self.db, [guest.uuid])[guest.uuid]
        return row['status'], row['reasons'][0] if row['reasons'] else None

    def test_an_old_host_without_the_workaround_is_no_by_policy(self):
        # The conductor refuses NUMA guests' migrations while any host
        # is of release 1: the answer says so, and how to change it.
        guest = self._guest()
        self.report('dst3', service_version=1)
        self.watch.look()
        status, reason = self._reason(guest)
        self.assertEqual(('no', 'policy'), (status, reason['kind']))
        self.assertIn('dst3', reason['detail'])
        self.assertIn('enable_numa_live_migration', reason['detail'])
        # dst3 upgraded: the guest is looked at again.
        self.report('dst3')
        self.watch.look()
        self.assertEqual(['yes'], self._answers(guest))

    def test_an_old_source_moves_only_to_a_guarded_host(self):
        self.reconfigure(enable_numa_live_migration_workaround=True)
        watch = live_migratable.LiveMigratableWatch(self.worker, sweep=0)
        self.report('src', service_version=1)
        for host in ('dst1', 'dst2', 'dst3'):
            self.report(host, migration_guard='off')
        guest = self._guest()
        other = self._guest(host='dst1')
        watch.look()
        status, reason = self._reason(guest)
        self.assertEqual(('no', 'guard'), (status, reason['kind']))
        self.assertIn('src runs release 1', reason['detail'])
        self.assertIn('[libvirt] migration_guard', reason['detail'])
        # A guest of a new source is not concerned.
        self.assertEqual(['yes'], self._answers(other))
        # dst2's guard turned on: its report alone makes it the witness.
        self.report('dst2', migration_guard='on')
        watch.look()
        row = answers.get_many(self.db, [guest.uuid])[guest.uuid]
        self.assertEqual(('yes', 'dst2'), (row['status'], row['witness']))
        # The guard off again, and the source upgraded: yes anywhere.
        self.report('dst2', migration_guard='off')
        watch.look()
        self.assertEqual(['no'], self._answers(guest))
        self.report('src')
        watch.look()
        self.assertEqual(['yes'], self._answers(guest))

    def test_cpu_model_from_the_reports_without_a_migration_check(self):
        for host in ('dst1', 'dst2', 'dst3'):
            self.report(host, cpu=_host_cpu(pku=False))
        guest = self._guest()
        other = self._guest()
        # src reports its guests' CPUs: one needs pku, the other runs
        # the hypervisor's default CPU.
        self.report('src', cpu=_host_cpu(pku=True), guest_cpus=[
            objects.InstanceCPU.of(guest.uuid, NEEDS_PKU),
            objects.InstanceCPU.of(other.uuid, cpumodel.GuestCPU())])
        self.watch.look()
        status, reason = self._reason(guest)
        self.assertEqual(('no', 'cpu-model'), (status, reason['kind']))
        self.assertIn('pku', reason['detail'])
        self.assertEqual(['yes'], self._answers(other))
        # dst2 now runs it: its report alone makes it the witness.
        assessed = self.watch.tracker.assessed
        self.report('dst2', cpu=_host_cpu(pku=True))
        self.watch.look()
        row = answers.get_many(self.db, [guest.uuid])[guest.uuid]
        self.assertEqual(('yes', 'dst2'), (row['status'], row['witness']))
        self.assertEqual(assessed + 1, self.watch.tracker.assessed)
        # dst2 runs it no more; then src tells the guest's CPU anew (it
        # was restarted with the default CPU): yes again.
        self.report('dst2', cpu=_host_cpu(pku=False))
        self.watch.look()
        self.assertEqual(['no'], self._answers(guest))
        self.report('src', cpu=_host_cpu(pku=True), guest_cpus=[
            objects.InstanceCPU.of(guest.uuid, cpumodel.GuestCPU())])
        self.watch.look()
        self.assertEqual(['yes'], self._answers(guest))

    def test_a_change_is_notified_once(self):
        heard = []
        self.db.change_listeners.append(heard.extend)
        guest = self._guest()
        self.watch.look()
        # A first answer of yes tells nothing; maintenance everywhere
        # tells the change; a second worker writing it again tells none.
        self.assertEqual([], [c for c in heard
                              if c.kind == 'live-migratable'])
        for host in ('dst1', 'dst2', 'dst3'):
            compute_nodes.set_disabled(self.db, host, 'firmware')
        self.watch.look()
        other = live_migratable.LiveMigratableWatch(self.worker, sweep=0)
        other.look()
        told = [c.record for c in heard if c.kind == 'live-migratable']
        self.assertEqual([(guest.uuid, 'yes', 'degraded')],
                         [(r['instance_uuid'], r['previous_status'],
                           r['status']) for r in told])

    def test_metric_counts_guests_by_answer(self):
        self._guest()
        self._guest()
        self._guest(vcpus=12)
        self.watch.look()
        [family] = conductor_metrics.LiveMigratableCollector(
            self.db).families()
        self.assertEqual({('yes', ''): 2, ('no', 'no-host-fits'): 1},
                         {(s.labels['status'], s.labels['reason']): s.value
                          for s in family.samples})

    def test_the_sweep_finds_what_no_change_announced(self):
        guest = self._guest()
        watch = live_migratable.LiveMigratableWatch(self.worker, sweep=1)
        watch.look()
        # Every destination silent for longer than service_down_time,
        # and the look at hosts left out: the sweep alone finds it.
        self.now = self.now.replace(year=self.now.year + 1)
        self.report('src')
        watch._look_at_hosts = lambda: None
        watch.look()
        self.assertEqual(['no'], self._answers(guest))

    def test_no_look_with_interval_zero(self):
        watch = live_migratable.LiveMigratableWatch(self.worker, interval=0)
        watch.start()
        watch.stop()
        self.assertEqual(0, watch.looks)

    def test_the_thread_looks_and_stops_at_once(self):
        guest = self._guest()
        watch = live_migratable.LiveMigratableWatch(self.worker,
                                                    interval=0.05)
        watch.start()
        try:
            for _ in range(200):
                if self._answers(guest) == ['yes']:
                    break
                watch._stopping.wait(0.05)
        finally:
            watch.stop()
        self.assertEqual(['yes'], self._answers(guest))
        self.assertFalse(watch._thread.is_alive())


class DrainPlanNamesTestCase(base.ConductorTestCase):
    """``host drain --dry-run`` names first the guests whose standing
    answer is not 'yes'."""

    def test_plan_names_the_guests_that_cannot_move(self):
        small = cbase.instance(host='src', vcpus=2, pins={0: 0, 1: 1})
        big = cbase.instance(host='src', vcpus=12,
                             pins={n: n for n in range(12)})
        for inst in (small, big):
            instances.create(self.db, inst)
        live_migratable.LiveMigratableWatch(self.worker, sweep=0).look()
        plan = self.call('host_drain_plan', 'src')
        self.assertEqual([(big.uuid, 'no', 'no-host-fits')],
                         [(g['instance_uuid'], g['status'],
                           g['reasons'][0]['kind'])
                          for g in plan['not_migratable']])
