"""The real tier: a TCG guest moves between two libvirtd hosts, re-pinned.

Hosts and guest are described in real_hosts: vCPU 0 of the guest moves
from pCPU 0 on src to pCPU 1 on dst, whose pCPU 0 a blocker holds.
"""

from numamig import exception
from tests.fixtures import libvirt_daemons
from tests.functional.libvirt import real_hosts
from tests.functional.libvirt.real_hosts import BLOCKER
from tests.functional.libvirt.real_hosts import GUEST

COMPLETED = 1  # VIR_DOMAIN_JOB_STATS_COMPLETED
KEEP_COMPLETED = 2  # VIR_DOMAIN_JOB_STATS_KEEP_COMPLETED


class RealMigrationTestCase(real_hosts.RealHostsTestCase):

    def test_migration_repins_on_destination(self):
        self.spawn_guest()
        samples = []
        result = self.drivers['src'].live_migrate(
            GUEST, self.dest_xml(), self.migrate_data(), samples.append)

        self.assert_moved_to_dst()
        self.assertFalse(result.emulated)
        self.assertFalse(result.post_copy or result.paused)
        # The downtime the source caught from libvirt's job-completed
        # event is the one the destination keeps in its completed job.
        stats = self.drivers['dst']._conn.lookupByUUIDString(GUEST).jobStats(
            COMPLETED | KEEP_COMPLETED)
        self.assertIsNotNone(result.downtime_ms)
        self.assertEqual(stats['downtime'], result.downtime_ms)
        self.assertEqual(stats['memory_processed'], result.memory_processed)
        self.assertLess(result.downtime_ms, result.elapsed_ms)
        self.record(f"migration: numamig {result.elapsed_ms} ms, libvirt "
                    f"{stats['time_elapsed']} ms, downtime "
                    f"{result.downtime_ms} ms, {len(samples)} progress "
                    f"samples")

    def test_abort_during_throttled_migration(self):
        self.spawn_guest(dirty=True)
        run = self.start_migration(bandwidth_mib=1)
        run.wait_for_progress()
        self.drivers['src'].live_migration_abort(GUEST)
        run.wait_for_end()

        self.assertIsInstance(run.error, exception.MigrationAborted)
        self.assert_still_on_src()
        self.assert_coherent_progress(run)

    def test_missing_numa_node_fails_cleanly(self):
        self.spawn_guest()
        dest_xml = self.dest_xml().replace(
            "nodeset='0'", "nodeset='1'").replace('nodeset="0"',
                                                  'nodeset="1"')
        exc = self.assertRaises(
            exception.NUMANodeUnavailable, self.drivers['src'].live_migrate,
            GUEST, dest_xml, self.migrate_data())
        self.assertIn('from src to dst', str(exc))
        self.assertIn(GUEST, self.drivers['src'].list_guests())
        self.assertEqual({BLOCKER: 'blocker'},
                         self.drivers['dst'].list_guests())

    def test_unreachable_peer(self):
        self.spawn_guest()
        data = self.migrate_data()
        data.dest_connect_uri = (f'qemu+tcp://127.0.0.1:'
                                 f'{libvirt_daemons.free_port()}/system')
        self.assertRaises(exception.MigrationPeerUnreachable,
                          self.drivers['src'].live_migrate, GUEST,
                          self.dest_xml(), data)
        self.assertIn(GUEST, self.drivers['src'].list_guests())
