"""Stream options checked against the source's libvirt before moving."""

import libvirt

from numamig import exception
from numamig.virt.libvirt import data_plane
from tests import base
from tests import libvirt_settings
from tests.unit.virt.libvirt import test_migration as tm

V9_0, V9_4 = 9000000, 9004000


def _check(version, bandwidth_mib=None, **settings):
    data_plane.check(libvirt_settings.migration(**settings), version,
                     'src', 'qemu+tcp://dst/system', bandwidth_mib)


class CheckTestCase(base.TestCase):

    def test_zstd_needs_libvirt_9_4(self):
        exc = self.assertRaises(exception.MigrationNotSupported, _check,
                                V9_0, compression='zstd',
                                parallel_connections=2)
        self.assertIn('live_migration_compression', str(exc))
        self.assertIn('needs libvirt 9.4.0 or later; this host runs 9.0.0',
                      str(exc))
        _check(V9_4, compression='zstd', parallel_connections=2)

    def test_parallel_and_tls_versions(self):
        _check(V9_0, parallel_connections=4, native_tls=True)
        exc = self.assertRaises(exception.MigrationNotSupported, _check,
                                5001000, parallel_connections=2)
        self.assertIn('needs libvirt 5.2.0', str(exc))
        exc = self.assertRaises(exception.MigrationNotSupported, _check,
                                3001000, native_tls=True)
        self.assertIn('native TLS', str(exc))

    def test_bandwidth_bounds(self):
        _check(V9_0, bandwidth_mib=data_plane.MAX_BANDWIDTH_MIB)
        exc = self.assertRaises(exception.MigrationNotSupported, _check,
                                V9_0,
                                bandwidth_mib=data_plane.MAX_BANDWIDTH_MIB + 1)
        self.assertIn('the bandwidth must be 0 (unlimited)', str(exc))

    def test_compression_needs_parallel_connections(self):
        exc = self.assertRaises(exception.InvalidConfiguration,
                                libvirt_settings.migration,
                                compression='zstd')
        self.assertIn('parallel connections only', str(exc))

    def test_flags_and_params(self):
        self.assertEqual((0, {}), data_plane.flags_and_params(
            libvirt_settings.migration()))
        self.assertEqual(
            (libvirt.VIR_MIGRATE_COMPRESSED,
             {libvirt.VIR_MIGRATE_PARAM_COMPRESSION: 'zstd'}),
            data_plane.flags_and_params(libvirt_settings.migration(
                compression='zstd', parallel_connections=2)))


class RefusedAtStartTestCase(base.TestCase):

    def test_nothing_moves(self):
        clock = tm.FakeClock()
        dom = tm.FakeDomain(clock)
        job = tm._job(dom, clock, compression='zstd',
                      parallel_connections=2)
        self.assertRaises(exception.MigrationNotSupported, job.run, 'u',
                          '<d/>', None)
        self.assertEqual([], dom.calls)


class ConnectionsTestCase(base.TestCase):
    """Parallel connections follow the CPUs chosen for the threads."""

    def _used(self, configured, cpus, compression='none'):
        return data_plane.connections_for(libvirt_settings.migration(
            parallel_connections=configured, compression=compression),
            cpus)

    def test_cut_to_the_cpus_available(self):
        self.assertEqual(3, self._used(8, 3))
        self.assertEqual(4, self._used(4, 16))

    def test_never_below_two_once_parallel(self):
        self.assertEqual(2, self._used(8, 2))

    def test_one_cpu_still_two(self):
        self.assertEqual(2, self._used(4, 1))

    def test_compressed_channels_left_as_configured(self):
        self.assertEqual(4, self._used(4, 1, compression='zstd'))

    def test_unchanged_when_no_cpus_chosen_or_not_parallel(self):
        self.assertEqual(4, self._used(4, 0))
        self.assertEqual(1, self._used(1, 8))
