"""The real tier: stream options checked against the source's libvirt.

This machine's libvirt is 9.0: zstd on parallel connections (libvirt
9.4) is refused before anything moves, while parallel connections alone
(libvirt 5.2) migrate.
"""

from numamig import exception
from tests.functional.libvirt import real_hosts
from tests.functional.libvirt.real_hosts import GUEST


class DataPlaneTestCase(real_hosts.RealHostsTestCase):

    def test_zstd_refused_on_libvirt_9_0_guest_stays(self):
        self.spawn_guest()
        source = self.driver('src', compression='zstd',
                             parallel_connections=2)
        version = source._connection().getLibVersion()
        if version >= 9004000:
            self.skipTest(f"libvirt {version} supports multifd zstd")
        exc = self.assertRaises(exception.MigrationNotSupported,
                                source.live_migrate, GUEST, self.dest_xml(),
                                self.migrate_data())
        self.assertIn('needs libvirt 9.4.0 or later; this host runs',
                      str(exc))
        self.assert_still_on_src()

    def test_parallel_connections_migrate(self):
        self.spawn_guest()
        source = self.driver('src', parallel_connections=2)
        result = source.live_migrate(GUEST, self.dest_xml(),
                                     self.migrate_data())
        self.assert_moved_to_dst()
        self.record(f"parallel connections 2: {result.elapsed_ms} ms, "
                    f"downtime {result.downtime_ms} ms")
