"""The real tier: the destination's migration guard under a real libvirtd.

The spec's "old source, new destination" cell: the source (acting as the
release before NUMA-aware live migration) sends its domain XML verbatim,
vCPU 0 still pinned to pCPU 0, which dst's blocker holds. dst's libvirtd
runs the guard's hook (installed by numamig's own installer in dst's
hooks directory before that libvirtd started), which rewrites the XML to
dst's claim: pCPU 1::

    src  guest-1 vCPU 0 -> pCPU 0     (sent verbatim)
    dst  blocker vCPU 0 -> pCPU 0;    claim: guest-1 vCPU 0 -> pCPU 1
"""

import os

from numamig import exception
from numamig.virt.libvirt import guard_install
from tests import libvirt_settings
from tests.fixtures import libvirt_daemons
from tests.functional.libvirt import real_hosts
from tests.functional.libvirt.real_hosts import GUEST

MIGRATION = '5a1e0000-aaaa-4bbb-8ccc-00000000c001'


class RealGuardTestCase(real_hosts.RealHostsTestCase):

    def guard_settings(self, name):
        if name != 'dst':
            return None
        directory = os.path.join(self.root, 'dst-guard')
        # The hook path as this process sees it: inside dst's mount
        # namespace the same file is /etc/libvirt/hooks/qemu.d/...
        return libvirt_settings.guard(
            hook_path=os.path.join(self.root, 'dst', 'etc', 'hooks',
                                   'qemu.d', 'numamig-migration-guard'),
            claims_file=os.path.join(directory, 'claims.json'),
            log_file=os.path.join(directory, 'guard.log'))

    def before_start(self, name):
        settings = self.guard_settings(name)
        if settings is None:
            return None

        def install(_directory):
            os.makedirs(os.path.dirname(settings.claims_file))
            state, _changed = guard_install.install(settings, name)
            self.assertEqual(guard_install.ON, state)
        return install

    def _claim_pcpu_1(self, topology=None):
        """What dst's agent does when it claims: publish the claim."""
        dst = self.drivers['dst']
        self.assertEqual(guard_install.ON, dst.migration_guard_state())
        dst.publish_move_claims(
            {GUEST: (MIGRATION, topology or real_hosts.placement(1))})

    def _guard_log(self):
        with open(self.guard_settings('dst').log_file) as f:
            return f.read()

    def test_old_source_verbatim_xml_gets_the_claimed_pins(self):
        self.spawn_guest()
        self._claim_pcpu_1()
        verbatim = self.drivers['src'].get_destination_xml(GUEST, None)
        self.assertEqual((['0'], '0'), self.pins(verbatim))

        result = self.drivers['src'].live_migrate(GUEST, verbatim,
                                                  self.migrate_data())

        dst = self.drivers['dst']
        self.assertEqual((['1'], '1'), self.pins(dst.get_domain_xml(GUEST)))
        pid = self.hosts['dst'].qemu_pid('guest-1')
        self.assertEqual({0: '1'}, libvirt_daemons.vcpu_thread_affinity(pid))
        log = self._guard_log()
        self.assertIn('incoming migration of guest-1: rewritten', log)
        self.assertIn('vcpupin 0: cpuset=0 -> cpuset=1', log)
        # libvirt's hook filters the live XML only; the agent's arrival
        # step defines the persistent one from the claim.
        self.assertEqual(['0'], self.pins(dst.get_domain_xml(
            GUEST, persistent=True))[0])
        self.assertIsNone(dst.check_arrival(GUEST, MIGRATION,
                                            real_hosts.placement(1)))
        self.assert_moved_to_dst()
        self.record(f"old source through the guard: {result.elapsed_ms} ms, "
                    f"downtime {result.downtime_ms} ms")

    def test_irreconcilable_claim_refuses_the_migration(self):
        self.spawn_guest()
        topology = real_hosts.placement(1)
        topology.cells[0].pagesize = 2048  # the guest has small pages
        self._claim_pcpu_1(topology)
        verbatim = self.drivers['src'].get_destination_xml(GUEST, None)
        exc = self.assertRaises(exception.HypervisorError,
                                self.drivers['src'].live_migrate, GUEST,
                                verbatim, self.migrate_data())
        self.assertIn('numamig migration guard: cannot be reconciled',
                      str(exc))
        self.assertIn('backed by 4 KiB pages, the claim took 2048 KiB',
                      str(exc))
        self.assertIn('refused', self._guard_log())
        self.assert_still_on_src()
