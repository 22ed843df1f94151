"""The shared QEMU capability cache and finding a guest's QEMU process.

No libvirtd runs here: the cache functions work on plain directories,
and the QEMU of a guest is stood in for by a process whose command line
looks like one (``qemu-...`` ... ``-uuid UUID``).
"""

import os
import subprocess
import sys
import time

import fixtures
from oslo_utils import uuidutils

from numamig_ci import libvirt_hosts
from tests import base

CAPS = libvirt_hosts.QEMU_CAPS_DIR


class CacheTest(base.TestCase):

    def setUp(self):
        super().setUp()
        top = self.useFixture(fixtures.TempDir()).path
        self.shared = os.path.join(top, 'shared')
        self.host_a = os.path.join(top, 'a', 'cache')
        self.host_b = os.path.join(top, 'b', 'cache')

    def write(self, cache, name, text):
        os.makedirs(os.path.join(cache, CAPS), exist_ok=True)
        with open(os.path.join(cache, CAPS, name), 'w') as f:
            f.write(text)

    def read(self, cache, name):
        with open(os.path.join(cache, CAPS, name)) as f:
            return f.read()

    def listing(self, cache):
        return sorted(os.listdir(os.path.join(cache, CAPS)))

    def test_first_host_starts_empty_and_publishes_its_probe(self):
        libvirt_hosts.seed_cache(self.shared, self.host_a)
        self.assertEqual([], self.listing(self.host_a))
        self.write(self.host_a, 'x86.xml', 'probed')
        libvirt_hosts.publish_cache(self.host_a, self.shared)
        self.assertEqual(['x86.xml'], self.listing(self.shared))
        libvirt_hosts.seed_cache(self.shared, self.host_b)
        self.assertEqual('probed', self.read(self.host_b, 'x86.xml'))

    def test_host_rewriting_its_copy_never_touches_the_shared_one(self):
        self.write(self.shared, 'x86.xml', 'old')
        libvirt_hosts.seed_cache(self.shared, self.host_a)
        libvirt_hosts.seed_cache(self.shared, self.host_b)
        self.write(self.host_a, 'x86.xml', 'new')
        self.assertEqual('old', self.read(self.shared, 'x86.xml'))
        self.assertEqual('old', self.read(self.host_b, 'x86.xml'))
        libvirt_hosts.publish_cache(self.host_a, self.shared)
        self.assertEqual('new', self.read(self.shared, 'x86.xml'))
        # No temporary file is left where a seeding host would look.
        self.assertEqual(['x86.xml'], self.listing(self.shared))

    def test_unchanged_file_is_not_rewritten(self):
        self.write(self.shared, 'x86.xml', 'same')
        libvirt_hosts.seed_cache(self.shared, self.host_a)
        before = os.stat(os.path.join(self.shared, CAPS, 'x86.xml'))
        libvirt_hosts.publish_cache(self.host_a, self.shared)
        after = os.stat(os.path.join(self.shared, CAPS, 'x86.xml'))
        self.assertEqual(before.st_ino, after.st_ino)

    def test_only_cache_files_travel(self):
        self.write(self.shared, '.x86.xml.partial', 'half')
        self.write(self.host_a, 'notes.txt', 'not a cache file')
        libvirt_hosts.seed_cache(self.shared, self.host_b)
        self.assertEqual([], self.listing(self.host_b))
        libvirt_hosts.publish_cache(self.host_a, self.shared)
        self.assertEqual(['.x86.xml.partial'], self.listing(self.shared))


class QemuPidTest(base.TestCase):

    def fake_qemu(self, uuid):
        """A process whose command line reads like a guest's QEMU."""
        link = os.path.join(self.useFixture(fixtures.TempDir()).path,
                            'qemu-system-x86_64')
        os.symlink(sys.executable, link)
        proc = subprocess.Popen(
            [link, '-c', 'import time; time.sleep(60)', '-uuid', uuid])
        self.addCleanup(proc.wait)
        self.addCleanup(proc.kill)
        # Popen may return while the kernel is still inside execve, before
        # the new command line is readable in /proc.
        deadline = time.monotonic() + 5
        while not _cmdline(proc.pid) and time.monotonic() < deadline:
            time.sleep(0.001)
        return proc

    def test_finds_the_guests_qemu(self):
        uuid = uuidutils.generate_uuid()
        pid = self.fake_qemu(uuid).pid
        self.fake_qemu(uuidutils.generate_uuid())
        self.assertEqual(pid, libvirt_hosts.qemu_pid_of(uuid))

    def test_no_qemu_names_the_guest(self):
        uuid = uuidutils.generate_uuid()
        self.assertRaisesMessage(
            LookupError, f"QEMU processes running guest {uuid} on this "
                         f"machine: none; expected exactly one",
            libvirt_hosts.qemu_pid_of, uuid, settle_s=0)

    def test_two_qemus_after_settling_are_refused(self):
        uuid = uuidutils.generate_uuid()
        pids = sorted([self.fake_qemu(uuid).pid,
                       self.fake_qemu(uuid).pid])
        self.assertRaisesMessage(
            LookupError, f"machine: {pids[0]}, {pids[1]}; expected",
            libvirt_hosts.qemu_pid_of, uuid, settle_s=0.2)

    def test_stale_pid_file_never_kills_another_hosts_qemu(self):
        # The pid in a host's pid file was reused by a QEMU that does not
        # live in the host's mount namespace (another host's, or here a
        # process of this test).
        qemu = self.fake_qemu(uuidutils.generate_uuid())
        host = libvirt_hosts.LibvirtHost(
            'h', self.useFixture(fixtures.TempDir()).path)
        piddir = os.path.join(host.directory, 'run', 'libvirt', 'qemu')
        os.makedirs(piddir)
        with open(os.path.join(piddir, 'guest.pid'), 'w') as f:
            f.write(str(qemu.pid))
        host._kill_leftover_qemu()
        self.assertRaises(subprocess.TimeoutExpired, qemu.wait, timeout=0.3)


def _cmdline(pid):
    with open(f'/proc/{pid}/cmdline', 'rb') as f:
        return f.read()
