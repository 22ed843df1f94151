"""The locality watch on the embedded tier: LibvirtDriver on libvirt's
test driver, QEMU's /proc written by the test.

The test driver keeps no QEMU, so a proc root in a temporary directory
holds what the kernel would show for each guest's QEMU: its command line
(``-uuid``) and its ``numa_maps``. Where its vCPUs ran comes from the
test driver's vcpuinfo, which reports the last CPU each vCPU may run on:
a guest with ``<vcpu cpuset='0-3,8-11'>`` runs on host node 0 of
numa-2cell-a.xml (node 0: 0-3,8-11; node 1: 4-7,12-15). Everything
libvirt is asked (live numatune, vCPU pins, metadata) goes through the
real library, and what it did is read back from the live domain XML.
"""

import os
from unittest import mock

import fixtures
from lxml import etree

from numamig import exception
from numamig.compute import events as events_mod
from numamig.compute import locality as watch_mod
from numamig.numa import locality
from numamig.virt.libvirt import locality as lv_locality
from tests import base
from tests.fixtures import libvirt_embedded
from tests.fixtures import libvirt_guests as guests

FLOATING = 'f10a0000-aaaa-4bbb-8ccc-000000000001'
OTHER = 'f10a0000-aaaa-4bbb-8ccc-000000000002'
# Shared pCPUs: node 0's 0 and 8, node 1's 4 and 12; the rest pinned
# guests' (never a floating guest's).
SHARED = frozenset({0, 8, 4, 12})
NODE0_SHARED = frozenset({0, 8})
# 256 MiB of guest memory in 4 KiB pages.
PAGES = 65536


def _domain(uuid, name, cpuset='0-3,8-11', numatune=''):
    return (f"<domain type='test'><name>{name}</name><uuid>{uuid}</uuid>"
            f"<memory unit='MiB'>256</memory>"
            f"<vcpu placement='static' cpuset='{cpuset}'>2</vcpu>"
            f"{numatune}<os><type>hvm</type></os></domain>")


def _numa_maps(node0_pages, node1_pages):
    """What a QEMU's numa_maps shows: its binary (not counted) and its
    guest RAM, an anonymous mapping split over the nodes."""
    counts = ' '.join(f'N{n}={p}' for n, p in ((0, node0_pages),
                                                (1, node1_pages)) if p)
    return ("55d1c2a00000 default file=/usr/bin/qemu-system-x86_64 "
            "mapped=1031 N0=1031 kernelpagesize_kB=4\n"
            f"7f2a40000000 default anon={node0_pages + node1_pages} "
            f"dirty={node0_pages + node1_pages} {counts} "
            "kernelpagesize_kB=4\n")


class LocalityTestCase(base.TestCase):

    def setUp(self):
        super().setUp()
        host = self.useFixture(libvirt_embedded.EmbeddedHost(
            'hostA', 'numa-2cell-a.xml', cpu_shared_set=SHARED))
        self.driver = host.driver
        self.conn = self.driver._connection()
        self.proc = self.useFixture(fixtures.TempDir()).path
        self._pids = {}

    def start(self, uuid, name, node0_pages=0, node1_pages=PAGES, **kw):
        dom = self.conn.defineXML(_domain(uuid, name, **kw))
        dom.create()
        self.place_memory(uuid, node0_pages, node1_pages)
        return dom

    def place_memory(self, uuid, node0_pages, node1_pages):
        """Write the guest's QEMU into the proc root, its memory so."""
        pid = self._pids.setdefault(uuid, str(1000 + len(self._pids)))
        os.makedirs(os.path.join(self.proc, pid), exist_ok=True)
        with open(os.path.join(self.proc, pid, 'cmdline'), 'wb') as f:
            f.write(b'/usr/bin/qemu-system-x86_64\0-name\0guest=g\0-uuid\0'
                    + uuid.encode() + b'\0')
        with open(os.path.join(self.proc, pid, 'numa_maps'), 'w') as f:
            f.write(_numa_maps(node0_pages, node1_pages))

    def sample(self, uuid):
        found = {s.uuid: s for s in self.driver.locality_samples(self.proc)}
        return found[uuid]

    def live(self, uuid):
        return etree.fromstring(
            self.driver.get_domain_xml(uuid).encode())


class DriverTest(LocalityTestCase):

    def test_floating_guest_measured(self):
        self.start(FLOATING, 'floating', node0_pages=PAGES // 4,
                   node1_pages=3 * PAGES // 4)
        sample = self.sample(FLOATING)
        self.assertEqual({0: PAGES // 4 * 4, 1: 3 * PAGES // 4 * 4},
                         sample.memory_kb)
        self.assertEqual({0: 2}, sample.vcpu_nodes)
        self.assertIsNone(sample.excluded)
        self.assertAlmostEqual(0.75, sample.remote_share)

    def test_guest_without_qemu_is_measured_empty(self):
        self.conn.defineXML(_domain(OTHER, 'other')).create()
        sample = self.sample(OTHER)
        self.assertEqual({}, sample.memory_kb)

    def test_move_binds_memory_and_pins_vcpus_live_only(self):
        self.start(FLOATING, 'floating')
        cpus = self.driver.move_guest_memory(FLOATING, 0, self.proc)
        live = self.live(FLOATING)
        memory = live.find('numatune/memory')
        self.assertEqual(('strict', '0'), (memory.get('mode'),
                                           memory.get('nodeset')))
        pins = {p.get('cpuset') for p in live.iterfind('cputune/vcpupin')}
        self.assertEqual(1, len(pins))
        self.assertTrue(cpus)
        self.assertLessEqual(set(cpus), NODE0_SHARED)
        self.assertEqual(lv_locality.OwnMove(0, cpus), lv_locality.own_move(
            self.driver.get_domain_xml(FLOATING)))
        # The definition is untouched: it floats again after a restart.
        persistent = etree.fromstring(self.driver.get_domain_xml(
            FLOATING, persistent=True).encode())
        self.assertIsNone(persistent.find('numatune'))
        self.assertIsNone(persistent.find('cputune'))
        # Its own binding does not make it a bound guest.
        self.assertIsNone(self.sample(FLOATING).excluded)

    def test_pinned_and_bound_guests_are_excluded(self):
        self.driver.spawn(guests.instance(vcpus=2, memory_mb=1024),
                          guests.topology(guests.cell(
                              0, host_cell=0, vcpus=[0, 1],
                              pins={0: 1, 1: 2})))
        self.start(OTHER, 'bound', numatune="<numatune><memory "
                   "mode='strict' nodeset='1'/></numatune>")
        self.assertEqual(locality.PINNED, self.sample(guests.UUID).excluded)
        self.assertEqual(locality.BOUND, self.sample(OTHER).excluded)

    def test_no_shared_cpu_it_may_run_on_refused(self):
        # Its vCPUs may run on node 1's dedicated pCPUs only.
        self.start(FLOATING, 'floating', cpuset='5-7')
        self.assertRaises(exception.HypervisorError,
                          self.driver.move_guest_memory, FLOATING, 1,
                          self.proc)
        self.assertIsNone(self.live(FLOATING).find('numatune'))

    def test_move_to_a_node_the_host_lacks_is_refused(self):
        self.start(FLOATING, 'floating')
        self.assertRaises(exception.HypervisorError,
                          self.driver.move_guest_memory,
                          FLOATING, 7, self.proc)
        self.assertIsNone(self.live(FLOATING).find('numatune'))


def _policy(**kw):
    values = {'mode': 'act', 'threshold': 0.5, 'intervals': 2,
              'pages_per_interval': 10 * PAGES, 'moves_per_guest': 2,
              'flap_window': 20}
    values.update(kw)
    return watch_mod.Policy(**values)


class WatchTest(LocalityTestCase):
    """The agent's watch over the driver: hysteresis, moves, records,
    exclusions and flapping, each read back from libvirt."""

    def watch(self, pinned=(), **policy):
        self.told = []
        events = events_mod.Events()
        events.listeners.append(self.told.extend)
        return watch_mod.LocalityWatch('hostA', self.driver,
                                       _policy(**policy), self.proc,
                                       lambda: list(pinned), events)

    def test_remote_guest_brought_back_after_the_hysteresis(self):
        self.start(FLOATING, 'floating')
        watch = self.watch()
        first = watch.look()
        self.assertEqual(locality.ABOVE, first.guests[0].state)
        self.assertIsNone(self.live(FLOATING).find('numatune'))
        second = watch.look()
        guest = second.guests[0]
        self.assertEqual((locality.MOVE, 0, 1.0),
                         (guest.state, guest.home_node, guest.remote_share))
        self.assertEqual({1: 256}, guest.memory_mb)
        self.assertEqual('0', self.live(FLOATING).find(
            'numatune/memory').get('nodeset'))
        self.assertEqual((1, PAGES), (second.moves_total,
                                      second.pages_moved_total))
        self.assertEqual(1.0, second.remote_share)
        self.assertEqual([('locality-move', 'moved', 0, PAGES)],
                         [(e.kind, e.record.outcome, e.record.target_node,
                           e.record.pages) for e in self.told])
        # The kernel moved the pages: the next look finds them local.
        self.place_memory(FLOATING, PAGES, 0)
        third = watch.look()
        self.assertEqual((locality.LOCAL, 0.0),
                         (third.guests[0].state, third.remote_share))

    def test_report_policy_moves_nothing(self):
        self.start(FLOATING, 'floating')
        watch = self.watch(mode='report')
        watch.look()
        shown = watch.look()
        self.assertEqual(locality.REPORTED, shown.guests[0].state)
        self.assertIsNone(self.live(FLOATING).find('numatune'))
        self.assertEqual([], self.told)

    def test_off_policy_looks_at_nothing(self):
        self.start(FLOATING, 'floating')
        with mock.patch.object(self.driver, 'locality_samples') as samples:
            shown = self.watch(mode='off').look()
        samples.assert_not_called()
        self.assertEqual(('off', []), (shown.policy, shown.guests))

    def test_pinned_and_bound_guests_never_touched(self):
        # Pinned by the records though not by its XML, and bound by XML.
        self.start(FLOATING, 'floating')
        self.start(OTHER, 'bound', numatune="<numatune><memory "
                   "mode='strict' nodeset='1'/></numatune>")
        watch = self.watch(pinned=[FLOATING], intervals=1, threshold=0.0)
        with mock.patch.object(self.driver, 'move_guest_memory') as move:
            for _ in range(4):
                shown = watch.look()
        move.assert_not_called()
        self.assertEqual({FLOATING: locality.PINNED, OTHER: locality.BOUND},
                         {g.instance_uuid: g.state for g in shown.guests})
        self.assertIsNone(self.live(FLOATING).find('numatune'))
        self.assertEqual('1', self.live(OTHER).find(
            'numatune/memory').get('nodeset'))

    def test_flapping_guest_left_alone_after_its_budget(self):
        """Its memory keeps landing on node 1 again: moved twice, then
        left alone with one notification, and libvirt asked no more."""
        self.start(FLOATING, 'floating')
        watch = self.watch(intervals=1, moves_per_guest=2)
        states = []
        calls = mock.Mock(wraps=self.driver.move_guest_memory)
        with mock.patch.object(self.driver, 'move_guest_memory', calls):
            for _ in range(5):
                states.append(watch.look().guests[0].state)
                # Whatever the watch did, the memory is back on node 1.
                self.place_memory(FLOATING, 0, PAGES)
        self.assertEqual([locality.MOVE, locality.MOVE] +
                         [locality.FLAPPING] * 3, states)
        self.assertEqual(2, calls.call_count)
        self.assertEqual(['moved', 'moved', 'flapping'],
                         [e.record.outcome for e in self.told])

    def test_refused_move_is_recorded_not_raised(self):
        self.start(FLOATING, 'floating')
        watch = self.watch(intervals=1)
        with mock.patch.object(lv_locality, 'move',
                               side_effect=ValueError('no CPU')):
            shown = watch.look()
        self.assertEqual(watch_mod.MOVE_FAILED, shown.guests[0].state)
        self.assertIn('no CPU', shown.guests[0].reason)
        self.assertEqual((0, 1), (shown.moves_total, watch.failures_total))
        self.assertEqual(['failed'], [e.record.outcome for e in self.told])

    def test_a_stopping_agent_moves_no_further_guest(self):
        self.start(FLOATING, 'floating')
        self.start(OTHER, 'other')
        watch = self.watch(intervals=1)
        real = self.driver.move_guest_memory

        def move_then_stop(uuid, node, proc):
            watch.stop()
            return real(uuid, node, proc)
        with mock.patch.object(self.driver, 'move_guest_memory',
                               side_effect=move_then_stop) as move:
            shown = watch.look()
        self.assertEqual(1, move.call_count)
        self.assertEqual(sorted([locality.MOVE, locality.WAITING_BUDGET]),
                         sorted(g.state for g in shown.guests))
