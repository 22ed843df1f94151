"""The pieces of a held real migration that need no libvirtd: the
kernel's range, the XML it is booted from, and the wait for the moment
to abort (on the conductor's migration_wait, never a fixed interval)."""

import struct

import fixtures
from lxml import etree

from numamig import objects
from numamig_ci import libvirt_hosts
from numamig_ci import slow_copy
from tests import base

DOMAIN = """<domain type='qemu'><name>g</name>
  <os><type arch='x86_64'>hvm</type></os>
  <cputune><vcpupin vcpu='0' cpuset='1'/></cputune></domain>"""


def _migration(status='queued', processed=0):
    return objects.Migration(uuid='6f1c1d3a-1111-4222-8333-444455556666',
                             instance_uuid='6f1c1d3a-1111-4222-8333-'
                                           '777788889999',
                             source_host='a', status=status,
                             memory_processed=processed)


class FakeClock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now

    def sleep(self, seconds):
        self.sleep_calls.append(seconds)
        self.now += seconds


class FakeAPI:
    """migration_wait answering with the next record of ``script``
    (each answer takes ``step`` seconds of the clock)."""

    def __init__(self, clock, script, step=1.0):
        self.clock, self.script, self.step = clock, list(script), step
        self.timeouts = []

    def migration_wait(self, ctxt, migration, timeout):
        self.timeouts.append(timeout)
        self.clock.now += self.step
        return self.script.pop(0) if self.script else migration


class KernelTest(base.TestCase):

    def test_range_ends_below_the_top_of_memory(self):
        self.assertEqual(96, slow_copy.dirtied_mib(128))
        self.assertEqual(48, slow_copy.dirtied_mib(64))
        self.assertEqual('dirtying-48m.bin', slow_copy.kernel_name(64))

    def test_too_small_a_guest_is_refused(self):
        self.assertRaises(ValueError, slow_copy.dirtied_mib, 31)

    def test_kernel_compares_with_the_asked_top(self):
        code = libvirt_hosts.dirtying_kernel(48)
        self.assertIn(b'\x81\xff' + struct.pack('<I', 48 << 20), code)
        self.assertEqual(len(libvirt_hosts.dirtying_kernel()), len(code))
        self.assertRaises(ValueError, libvirt_hosts.dirtying_kernel, 4096)

    def test_written_where_asked(self):
        top = self.useFixture(fixtures.TempDir()).path
        path = slow_copy.write_kernel(top, 64)
        with open(path, 'rb') as f:
            self.assertEqual(libvirt_hosts.dirtying_kernel(48), f.read())


class WithKernelTest(base.TestCase):

    def test_kernel_added_and_the_rest_kept(self):
        doc = etree.fromstring(slow_copy.with_kernel(DOMAIN, '/k.bin'))
        self.assertEqual('/k.bin', doc.findtext('os/kernel'))
        self.assertEqual('hvm', doc.findtext('os/type'))
        self.assertEqual('1', doc.find('cputune/vcpupin').get('cpuset'))

    def test_kernel_replaced(self):
        once = slow_copy.with_kernel(DOMAIN, '/a.bin')
        doc = etree.fromstring(slow_copy.with_kernel(once, '/b.bin'))
        self.assertEqual(['/b.bin'],
                         [k.text for k in doc.iterfind('os/kernel')])


class WaitTest(base.TestCase):

    def setUp(self):
        super().setUp()
        self.clock = FakeClock()
        self.clock.sleep_calls = []

    def wait(self, script, until, timeout=60, step=1.0):
        self.api = FakeAPI(self.clock, script, step)
        return slow_copy.wait_until(self.api, None, _migration(), until,
                                    timeout, clock=self.clock,
                                    sleep=self.clock.sleep)

    def test_running_is_reached_at_the_status(self):
        got = self.wait([_migration('running')], slow_copy.RUNNING)
        self.assertEqual('running', got.status)
        self.assertEqual(1, len(self.api.timeouts))

    def test_copying_waits_for_bytes_sent(self):
        got = self.wait([_migration('running'),
                         _migration('running', 4096)], slow_copy.COPYING)
        self.assertTrue(slow_copy.reached(got, slow_copy.COPYING))
        self.assertEqual(2, len(self.api.timeouts))

    def test_an_ended_migration_stops_the_wait(self):
        got = self.wait([_migration('completed', 1)], slow_copy.COPYING)
        self.assertEqual('completed', got.status)
        self.assertFalse(slow_copy.reached(got, slow_copy.COPYING))

    def test_deadline_bounds_every_wait(self):
        got = self.wait([], slow_copy.RUNNING, timeout=45, step=15.0)
        self.assertEqual('queued', got.status)
        self.assertEqual(45, self.clock.now)
        self.assertEqual([30, 30, 15], self.api.timeouts)

    def test_unchanged_early_answer_pauses_before_asking_again(self):
        # A conductor holding all the waits it allows answers at once.
        self.wait([_migration(), _migration('running')], slow_copy.RUNNING,
                  step=0.0)
        self.assertEqual([slow_copy.BUSY_PAUSE_S], self.clock.sleep_calls)
