"""Tests of the standing live-migratable answer (scheduler.migratable).

The incremental answer is checked against a full recompute (every guest
assessed whole, the brute force) on generated clouds after every change.
"""

import random

from numamig import cpumodel
from numamig import objects
from numamig.numa import constraints
from numamig.numa import fit
from numamig.numa import usage
from numamig.scheduler import host_state
from numamig.scheduler import migratable
from numamig.scheduler import scheduler
from tests import base
from tests.unit.scheduler import hosts

OLD_SOURCE = "its source src runs release 1"
RICH = cpumodel.GuestCPU('host-passthrough', 'Icelake-Server',
                         frozenset({'avx512f', 'pku'}))
# A guest CPU every Icelake host runs; one no host here runs.
PLAIN = cpumodel.GuestCPU('custom', 'Icelake-Server', frozenset({'avx512f'}))
ALIEN = cpumodel.GuestCPU('host-passthrough', 'Icelake-Server',
                          frozenset({'avx512f', 'amx-tile'}))
GUEST_CPUS = (None, RICH, PLAIN, ALIEN)


def _request(vcpus, memory_mb=1024, pinned=True, nodes=1):
    specs = {'hw:numa_nodes': str(nodes)}
    if pinned:
        specs['hw:cpu_policy'] = 'dedicated'
    return constraints.get_numa_request(vcpus, memory_mb, specs, {})


def _cpu(rich):
    """A host CPU with pku (True), without (False), or unknown (None:
    a report that tells none, never judged unable)."""
    if rich is None:
        return None
    features = ['avx512f', 'pku'] if rich else ['avx512f']
    return objects.HostCPU(model='Icelake-Server', features=features)


class Cloud:
    """A cache of hosts whose usage, maintenance and CPU tests change."""

    def __init__(self, clock):
        self.cache = host_state.HostStateCache(clock=clock)
        self.clock = clock
        self.disabled = {}
        self.topologies = {}
        self.cpus = {}
        self.guards = {}
        self.sched = scheduler.Scheduler(self.cache, strategy='spread',
                                         max_candidates=2)

    def put(self, host, topology, rich=True, guard=None):
        self.topologies[host] = topology
        self.cpus[host] = rich
        guard = self.guards.get(host, 'on') if guard is None else guard
        self.guards[host] = guard
        report = hosts.report(host, topology=topology,
                              reported_at=self.clock())
        report.cpu = _cpu(rich)
        report.migration_guard = guard
        self.cache.update(report)

    def use(self, host, request):
        """Run a guest there (as a report saying so would)."""
        result = fit.fit(self.topologies[host], request)
        if result.fits:
            self.put(host, usage.apply(self.topologies[host],
                                       result.topology), self.cpus[host])
        return result.fits


class _ThreeHosts(base.TestCase):
    """src (the guests' host), a and b: empty 2-cell hosts."""

    def setUp(self):
        super().setUp()
        self.flags(service_down_time=60)
        self.cloud = Cloud(hosts.Clock())
        for name in ('src', 'a', 'b'):
            self.cloud.put(name, hosts.host_topology())


class TestAssess(_ThreeHosts):

    def _assess(self, guest):
        return migratable.assess(self.cloud.sched, guest,
                                 self.cloud.disabled)

    def test_fits_somewhere_is_yes_with_a_witness(self):
        status = self._assess(migratable.Guest('g1', 'src', _request(2)))
        self.assertEqual(migratable.YES, status.status)
        self.assertIn(status.witness, ('a', 'b'))
        self.assertEqual((), status.reasons)

    def test_too_big_for_any_host_names_the_closest_miss(self):
        status = self._assess(migratable.Guest('g1', 'src', _request(16)))
        self.assertEqual(migratable.NO, status.status)
        [reason] = status.reasons
        self.assertEqual(migratable.NO_HOST_FITS, reason.kind)
        self.assertIsNone(status.witness)

    def test_only_maintenance_hosts_fit_is_degraded(self):
        self.cloud.disabled = {'a': 'fans', 'b': 'bios'}
        status = self._assess(migratable.Guest('g1', 'src', _request(2)))
        self.assertEqual(migratable.DEGRADED, status.status)
        self.assertEqual([migratable.ONLY_MAINTENANCE],
                         [r.kind for r in status.reasons])
        self.assertIn('a, b', status.reasons[0].detail)

    def test_cpu_no_enabled_host_runs_is_no_by_cpu_model(self):
        self.cloud.put('a', hosts.host_topology(), rich=False)
        self.cloud.put('b', hosts.host_topology(), rich=False)
        status = self._assess(migratable.Guest('g1', 'src', _request(2),
                                               guest_cpu=RICH))
        self.assertEqual(migratable.NO, status.status)
        [reason] = status.reasons
        self.assertEqual(migratable.CPU_MODEL, reason.kind)
        self.assertIn('pku', reason.detail)

    def test_cpu_is_judged_on_every_host_not_the_first_candidates(self):
        # max_candidates is 2 and the two emptiest hosts cannot run the
        # guest's CPU; a fuller third one can.
        self.cloud.put('a', hosts.host_topology(), rich=False)
        self.cloud.put('b', hosts.host_topology(), rich=False)
        self.cloud.put('c', hosts.host_topology(), rich=True)
        self.cloud.use('c', _request(2))
        status = self._assess(migratable.Guest('g1', 'src', _request(2),
                                               guest_cpu=RICH))
        self.assertEqual((migratable.YES, 'c'),
                         (status.status, status.witness))

    def test_old_source_without_a_guarded_host_is_no_by_guard(self):
        for name in ('a', 'b'):
            self.cloud.put(name, hosts.host_topology(), guard='off')
        status = self._assess(migratable.Guest(
            'g1', 'src', _request(2), guard=OLD_SOURCE))
        self.assertEqual(migratable.NO, status.status)
        [reason] = status.reasons
        self.assertEqual(migratable.GUARD, reason.kind)
        self.assertIn('release 1', reason.detail)
        self.assertIn('migration_guard', reason.detail)
        self.assertIn(status.witness, ('a', 'b'))

    def test_old_source_moves_to_a_guarded_host_past_the_first(self):
        # max_candidates is 2: the two emptiest hosts have no guard, a
        # fuller third one has.
        for name in ('a', 'b'):
            self.cloud.put(name, hosts.host_topology(), guard='off')
        self.cloud.put('c', hosts.host_topology(), guard='on')
        self.cloud.use('c', _request(2))
        status = self._assess(migratable.Guest(
            'g1', 'src', _request(2), guard=OLD_SOURCE))
        self.assertEqual((migratable.YES, 'c'),
                         (status.status, status.witness))

    def test_new_source_ignores_the_guard(self):
        for name in ('a', 'b'):
            self.cloud.put(name, hosts.host_topology(), guard='off')
        status = self._assess(migratable.Guest('g1', 'src', _request(2)))
        self.assertEqual(migratable.YES, status.status)

    def test_old_source_too_big_anywhere_is_no_host_fits(self):
        self.cloud.put('a', hosts.host_topology(), guard='off')
        status = self._assess(migratable.Guest(
            'g1', 'src', _request(16), guard=OLD_SOURCE))
        self.assertEqual([migratable.NO_HOST_FITS],
                         [r.kind for r in status.reasons])

    def test_blockers_answer_no_without_a_search(self):
        blocker = migratable.Reason(migratable.POLICY, 'pinned by policy')
        status = self._assess(migratable.Guest(
            'g1', 'src', _request(2), blockers=(blocker,)))
        self.assertEqual((migratable.NO, (blocker,)),
                         (status.status, status.reasons))


class TestTracker(_ThreeHosts):

    def setUp(self):
        super().setUp()
        self.tracker = migratable.Tracker(
            self.cloud.sched, disabled=lambda: self.cloud.disabled)

    def test_new_guests_wait_within_the_budget(self):
        for n in range(5):
            self.tracker.guest_changed(
                migratable.Guest(f'g{n}', 'src', _request(2)))
        self.assertEqual(5, self.tracker.pending)
        self.assertEqual(2, len(self.tracker.catch_up(budget=2)))
        self.assertEqual(3, self.tracker.pending)
        self.tracker.catch_up()
        self.assertEqual(0, self.tracker.pending)
        self.assertEqual({(migratable.YES, ''): 5}, self.tracker.counts())

    def test_a_report_of_another_host_costs_no_selection(self):
        self.tracker.guest_changed(migratable.Guest('g1', 'src',
                                                    _request(2)))
        self.tracker.catch_up()
        witness = self.tracker.statuses['g1'].witness
        other = 'b' if witness == 'a' else 'a'
        assessed = self.tracker.assessed
        self.cloud.use(other, _request(2))
        self.tracker.host_changed(other)
        self.assertEqual(0, self.tracker.pending)
        self.tracker.catch_up()
        self.assertEqual(assessed, self.tracker.assessed)

    def test_witness_filled_up_moves_the_answer(self):
        self.tracker.guest_changed(migratable.Guest('g1', 'src',
                                                    _request(4)))
        self.tracker.catch_up()
        witness = self.tracker.statuses['g1'].witness
        other = 'b' if witness == 'a' else 'a'
        # Fill both hosts' cells (two 4-pCPU cells each).
        for host in (other, witness):
            self.cloud.use(host, _request(4))
            self.cloud.use(host, _request(4))
            self.tracker.host_changed(host)
        changes = self.tracker.catch_up()
        self.assertEqual([('g1', migratable.YES, migratable.NO)],
                         [(u, old.status, new.status)
                          for u, old, new in changes])

    def test_maintenance_ended_makes_degraded_yes(self):
        self.cloud.disabled = {'a': 'x', 'b': 'y'}
        self.tracker.guest_changed(migratable.Guest('g1', 'src',
                                                    _request(2)))
        self.tracker.catch_up()
        self.assertEqual(migratable.DEGRADED,
                         self.tracker.statuses['g1'].status)
        del self.cloud.disabled['b']
        self.tracker.host_changed('b')
        [(_, old, new)] = self.tracker.catch_up()
        self.assertEqual((migratable.DEGRADED, migratable.YES, 'b'),
                         (old.status, new.status, new.witness))

    def test_silent_host_loss_is_found_by_the_sweep(self):
        self.tracker.guest_changed(migratable.Guest('g1', 'src',
                                                    _request(2)))
        self.tracker.catch_up()
        # Every host but the source stops reporting: no change tells.
        self.cloud.clock.advance(120)
        self.cloud.put('src', self.cloud.topologies['src'])
        self.assertEqual([], self.tracker.catch_up())
        self.tracker.sweep(1)
        [(_, _, new)] = self.tracker.catch_up()
        self.assertEqual(migratable.NO, new.status)

    def test_removed_guest_is_forgotten(self):
        self.tracker.guest_changed(migratable.Guest('g1', 'src',
                                                    _request(2)))
        self.tracker.catch_up()
        self.assertEqual(migratable.YES,
                         self.tracker.guest_removed('g1').status)
        self.assertEqual({}, self.tracker.counts())
        self.tracker.host_changed('a')
        self.assertEqual(0, self.tracker.pending)


class TestAgainstFullRecompute(base.TestCase):
    """Generated clouds and changes: after every change and catch-up,
    each guest's answer is the one a full recompute gives."""

    CASES = 400

    def setUp(self):
        super().setUp()
        self.flags(service_down_time=60)

    def _case(self, rnd):
        cloud = Cloud(hosts.Clock())
        names = [f'h{n}' for n in range(rnd.randint(2, 5))]
        for name in names:
            cloud.put(name, hosts.host_topology(
                cells=rnd.choice((1, 2)), pcpus=rnd.choice((2, 4)),
                memory_mb=rnd.choice((2048, 4096))),
                rich=rnd.choice((True, True, False, None)),
                guard='on' if rnd.random() < 0.5 else 'off')
        tracker = migratable.Tracker(cloud.sched,
                                     disabled=lambda: cloud.disabled,
                                     budget=rnd.randint(1, 4))
        guests = []
        for n in range(rnd.randint(1, 6)):
            blockers = ()
            if rnd.random() < 0.1:
                blockers = (migratable.Reason(migratable.POLICY, 'no'),)
            # Two guest nodes only where vCPUs and memory split evenly.
            vcpus = rnd.choice((1, 2, 3, 4))
            even = vcpus % 2 == 0
            shape = (vcpus,
                     rnd.choice((512, 1024, 4096 if even else 3072)),
                     rnd.random() < 0.7,
                     rnd.choice((1, 1, 2)) if even else 1,
                     rnd.choice(GUEST_CPUS),
                     rnd.random() < 0.3)
            memory_mb, pinned, nodes, guest_cpu, old_source = shape[1:]
            guest = migratable.Guest(
                f'guest-{n}', rnd.choice(names),
                _request(vcpus, memory_mb=memory_mb, pinned=pinned,
                         nodes=nodes),
                guest_cpu=guest_cpu, blockers=blockers,
                guard=OLD_SOURCE if old_source else None,
                # Half of them share checks with the guests of their shape.
                kind=shape if rnd.random() < 0.5 else None)
            guests.append(guest)
            tracker.guest_changed(guest)
        return cloud, names, tracker, guests

    def _change(self, rnd, cloud, names, tracker, guests):
        host = rnd.choice(names)
        what = rnd.random()
        if what < 0.4:
            cloud.use(host, _request(rnd.choice((1, 2, 4)),
                                     memory_mb=rnd.choice((512, 2048))))
        elif what < 0.55:
            cloud.put(host, hosts.host_topology(
                cells=rnd.choice((1, 2)), pcpus=rnd.choice((2, 4))),
                rich=cloud.cpus[host])
        elif what < 0.62:
            # Its CPU changed (unknown, without pku, with it).
            cloud.put(host, cloud.topologies[host],
                      rich={None: False, False: True,
                            True: None}[cloud.cpus[host]])
        elif what < 0.7:
            # Its migration guard turned on or off.
            cloud.put(host, cloud.topologies[host], rich=cloud.cpus[host],
                      guard='off' if cloud.guards[host] == 'on' else 'on')
        elif what < 0.85:
            if host in cloud.disabled:
                del cloud.disabled[host]
            else:
                cloud.disabled[host] = 'maintenance'
        else:
            # A guest moved to another host (its CPU as the new host
            # reports it may differ: host-passthrough, or restarted).
            n = rnd.randrange(len(guests))
            guest_cpu = guests[n].guest_cpu
            kind = guests[n].kind
            if rnd.random() < 0.3:
                guest_cpu = rnd.choice(GUEST_CPUS)
                kind = None if kind is None else kind[:4] + (
                    guest_cpu,) + kind[5:]
            moved = migratable.Guest(
                guests[n].uuid, host, guests[n].request,
                guest_cpu=guest_cpu, blockers=guests[n].blockers,
                kind=kind, guard=guests[n].guard)
            guests[n] = moved
            tracker.guest_changed(moved)
            return
        tracker.host_changed(host)

    def test_equal_to_a_full_recompute(self):
        rnd = random.Random(20261128)
        checked = 0
        seen = set()
        for _ in range(self.CASES):
            cloud, names, tracker, guests = self._case(rnd)
            for _step in range(rnd.randint(1, 8)):
                self._change(rnd, cloud, names, tracker, guests)
                while tracker.pending:
                    tracker.catch_up()
                for guest in guests:
                    full = migratable.assess(cloud.sched, guest,
                                             cloud.disabled)
                    kept = tracker.statuses[guest.uuid]
                    self.assertTrue(
                        kept.same_answer(full),
                        f"{guest.uuid}: kept {kept}, full {full}")
                    checked += 1
                    seen.update(r.kind for r in full.reasons)
        # The generator reaches every answer.
        self.assertGreater(checked, 2000)
        self.assertEqual({migratable.NO_HOST_FITS, migratable.CPU_MODEL,
                          migratable.ONLY_MAINTENANCE, migratable.POLICY,
                          migratable.GUARD}, seen)
