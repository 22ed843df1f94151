"""The real tier: two libvirtd hosts on this machine, a TCG guest moves.

This machine has one NUMA node and pCPUs 0-1, so placements move between
pCPU 0 and 1::

    host A (src): guest-1 vCPU 0 -> pCPU 0
    host B (dst): blocker vCPU 0 -> pCPU 0, so the claim gives pCPU 1

Skipped, with the reason printed, only where the machine cannot run
libvirtd hosts (no root, no unshare, no libvirtd or QEMU).
"""

import os
import threading

import fixtures
from lxml import etree
from testtools import content

from numamig import exception
from numamig import objects
from numamig.virt.libvirt import driver
from numamig.virt.libvirt import settings as lv_settings
from tests import base
from tests.fixtures import libvirt_daemons
from tests.fixtures import libvirt_guests as guests

GUEST = '5a1e0000-aaaa-4bbb-8ccc-00000000a001'
BLOCKER = '5a1e0000-aaaa-4bbb-8ccc-00000000b001'
MEMORY_MB = 128


def _placement(pcpu, host_cell=0):
    return guests.topology(
        guests.cell(0, host_cell=host_cell, vcpus=[0], pins={0: pcpu},
                    memory_mb=MEMORY_MB, cpu_policy='dedicated'),
        instance_uuid=None)


class RealHostsTestCase(base.TestCase):

    def setUp(self):
        super().setUp()
        reason = libvirt_daemons.missing_requirements()
        if reason:
            print(f"SKIP real libvirt tier: {reason}")
            self.skipTest(reason)
        root = self.useFixture(fixtures.TempDir()).path
        self.hosts, self.drivers = {}, {}
        for name in ('src', 'dst'):
            daemon = self.useFixture(libvirt_daemons.LibvirtDaemon(name,
                                                                   root))
            self.hosts[name] = daemon
            self.drivers[name] = self._driver(name, daemon)
        self.kernel = os.path.join(root, 'dirty.bin')
        with open(self.kernel, 'wb') as f:
            f.write(libvirt_daemons.dirtying_kernel())
        self.drivers['dst'].spawn(
            guests.instance(1, MEMORY_MB, 'blocker', BLOCKER),
            _placement(0))

    def _driver(self, name, daemon):
        settings = lv_settings.LibvirtSettings(
            host=name, uri=daemon.uri, virt_type='qemu',
            cpu_dedicated_set=frozenset({0, 1}),
            reserved_host_memory_mb=0,
            migration=lv_settings.MigrationSettings(
                inbound_addr='127.0.0.1', libvirtd_port=daemon.port,
                progress_interval_s=0.2))
        drv = driver.LibvirtDriver(settings)
        self.addCleanup(drv.cleanup_host)
        drv.init_host(name)
        return drv

    def _spawn_guest(self, dirty=False):
        base_xml = None
        if dirty:
            base_xml = (
                "<domain type='qemu'><os><type arch='x86_64'>hvm</type>"
                f"<kernel>{self.kernel}</kernel></os><devices>"
                "<memballoon model='none'/></devices></domain>")
        self.drivers['src'].spawn(
            guests.instance(1, MEMORY_MB, 'guest-1', GUEST),
            _placement(0), base_xml=base_xml)

    def _migrate_data(self):
        connect_uri, migration_uri = self.drivers['dst'].migration_target()
        return objects.LiveMigrateData(
            instance_uuid=GUEST, source_host='src', dest_host='dst',
            migration_uuid='5a1e0000-aaaa-4bbb-8ccc-00000000c001',
            dest_connect_uri=connect_uri, migration_uri=migration_uri)

    def _dest_xml(self, topology):
        dst = self.drivers['dst']
        info = dst.build_migrate_info(topology, dst.get_host_topology())
        return self.drivers['src'].get_destination_xml(GUEST, info)

    def _pins(self, xml):
        doc = etree.fromstring(xml)
        return ([el.get('cpuset') for el in doc.iterfind(
            'cputune/vcpupin')], doc.find('cputune/emulatorpin').get(
                'cpuset'))

    def test_migration_repins_on_destination(self):
        self._spawn_guest()
        samples = []
        result = self.drivers['src'].live_migrate(
            GUEST, self._dest_xml(_placement(1)), self._migrate_data(),
            samples.append)

        src, dst = self.drivers['src'], self.drivers['dst']
        self.assertNotIn(GUEST, src.list_guests())
        self.assertEqual((['1'], '1'),
                         self._pins(dst.get_domain_xml(GUEST)))
        self.assertEqual((['1'], '1'), self._pins(
            dst.get_domain_xml(GUEST, persistent=True)))
        pid = self.hosts['dst'].qemu_pid('guest-1')
        self.assertEqual({0: '1'}, libvirt_daemons.vcpu_thread_affinity(pid))
        self.assertFalse(result.emulated)
        stats = dst._conn.lookupByUUIDString(GUEST).jobStats(
            flags=1)  # VIR_DOMAIN_JOB_STATS_COMPLETED
        figures = (f"migration: numamig {result.elapsed_ms} ms, libvirt "
                   f"{stats.get('time_elapsed')} ms, downtime "
                   f"{stats.get('downtime')} ms, "
                   f"{len(samples)} progress samples")
        print(figures)
        self.addDetailUniqueName('figures',
                                 content.text_content(figures))

    def test_abort_during_throttled_migration(self):
        self._spawn_guest(dirty=True)
        data = self._migrate_data()
        data.bandwidth_mib = 1
        started, outcome = threading.Event(), {}

        def progress(sample):
            if sample.memory_processed:
                started.set()

        def migrate():
            try:
                self.drivers['src'].live_migrate(
                    GUEST, self._dest_xml(_placement(1)), data, progress)
            except exception.NumamigException as exc:
                outcome['error'] = exc

        worker = threading.Thread(target=migrate)
        worker.start()
        self.assertTrue(started.wait(30), "migration never made progress")
        self.drivers['src'].live_migration_abort(GUEST)
        worker.join(60)

        self.assertIsInstance(outcome.get('error'),
                              exception.MigrationAborted)
        self.assertIn(GUEST, self.drivers['src'].list_guests())
        self.assertEqual((['0'], '0'),
                         self._pins(self.drivers['src'].get_domain_xml(
                             GUEST)))
        self.assertEqual({BLOCKER: 'blocker'},
                         self.drivers['dst'].list_guests())

    def test_missing_numa_node_fails_cleanly(self):
        self._spawn_guest()
        dest_xml = self._dest_xml(_placement(1)).replace(
            "nodeset='0'", "nodeset='1'").replace('nodeset="0"',
                                                  'nodeset="1"')
        exc = self.assertRaises(
            exception.NUMANodeUnavailable, self.drivers['src'].live_migrate,
            GUEST, dest_xml, self._migrate_data())
        self.assertIn('from src to dst', str(exc))
        self.assertIn(GUEST, self.drivers['src'].list_guests())
        self.assertEqual({BLOCKER: 'blocker'},
                         self.drivers['dst'].list_guests())

    def test_unreachable_peer(self):
        self._spawn_guest()
        data = self._migrate_data()
        data.dest_connect_uri = (f'qemu+tcp://127.0.0.1:'
                                 f'{libvirt_daemons.free_port()}/system')
        self.assertRaises(exception.MigrationPeerUnreachable,
                          self.drivers['src'].live_migrate, GUEST,
                          self._dest_xml(_placement(1)), data)
        self.assertIn(GUEST, self.drivers['src'].list_guests())
