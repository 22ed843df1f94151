"""``host reclaim`` and ``instance memory set`` carried out on a real guest.

Always on. numamig-manage runs in this process (its ``main``) against an
embedded deployment whose one compute host is a real libvirtd (the real
tier's daemon), so the commands go through the real conductor, its
memory-change records, the compute RPC ``resize_virtio_mem`` and the
libvirt driver, and reach a real guest kernel with the ``virtio_mem``
driver under TCG (tests.fixtures.vmem_guest). This machine has one host
NUMA node: the reclaim is on node 0 (several nodes: the nested tier).

What is read back, each from its own source: the command's answer (done,
the guest reached its size), the guest kernel's MemTotal on its console,
libvirt's live device XML, numamig's records (the instance's topology)
and the host's report (its node's memory usage).
"""

import contextlib
import io
import json
import os
import re
import time

import fixtures

from numamig import embedded
from numamig.cmd import manage
from tests import base
from tests.fixtures import libvirt_daemons
from tests.fixtures import vmem_guest
from tests.functional.libvirt import real_hosts

HOST = 'vmem-host'
# The guest's boot memory and device (MiB): it starts with 256 plugged.
BOOT_MB, DEVICE_MB, PLUGGED_MB = 256, 512, 256
RECLAIM_MB = 128
# TCG on two busy cores: booting to the driver's first plug takes 7-20 s
# (measured), a resize of 128 MiB about 2 s.
BOOT_S = 180
RESIZE_TIMEOUT_S = 60
CONSOLE_S = 60
KIB = 1024


class RealManageVirtioMemTestCase(base.TestCase):

    def setUp(self):
        super().setUp()
        root = real_hosts.start_root(self)
        try:
            self.kernel, self.initrd = vmem_guest.build()
        except vmem_guest.Unavailable as exc:
            self.fail(f"no guest kernel with the virtio_mem driver: {exc}")
        daemon = self.useFixture(libvirt_daemons.LibvirtDaemon(HOST, root))
        state = self.useFixture(fixtures.TempDir()).path
        self.flags(group='virtio_mem', resize_timeout=RESIZE_TIMEOUT_S,
                   max_loss_mb=1024)
        self.dep = embedded.EmbeddedDeployment(
            [embedded.HostDefinition(
                HOST, uri=daemon.uri, cpu_dedicated_set={0, 1},
                reserved_host_memory_mb=0)],
            state_dir=state)
        self.addCleanup(self.dep.stop)
        self.dep.start()
        self.driver = self.dep.agent(HOST).driver
        self.serial = os.path.join(root, 'guest.console')
        self.config = os.path.join(state, 'numamig.conf')
        with open(self.config, 'w') as handle:
            handle.write(f"[DEFAULT]\ntransport_url = inproc://\n"
                         f"[database]\nconnection = {self.dep.db_url}\n"
                         f"[virtio_mem]\nresize_timeout = "
                         f"{RESIZE_TIMEOUT_S}\n")

    def json_of(self, *argv):
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), \
                contextlib.redirect_stderr(err):
            code = manage.main(['--config-file', self.config, *argv,
                                '--format', 'json'])
        self.assertEqual(0, code, f"{argv}: {out.getvalue()}"
                                  f"{err.getvalue()}")
        return json.loads(out.getvalue())

    def create_guest(self):
        """``instance create`` with a device, then the same guest booted
        from the virtio-mem test kernel.

        numamig creates diskless guests with nothing to boot; the agent's
        own driver defines it again from the instance's record and
        numamig's XML built on the kernel's base XML (as ``spawn`` with a
        base XML does), so its NUMA parts and device are numamig's.
        """
        created = self.json_of(
            'instance', 'create', '--host', HOST, '--vcpus', '1',
            '--memory', str(BOOT_MB),
            '--property', 'hw:cpu_policy=dedicated',
            '--property', f'hw:virtio_mem_size={DEVICE_MB}',
            '--property', f'hw:virtio_mem_requested={PLUGGED_MB}')
        uuid = created['uuid']
        record = self.dep.api.instance_get(self.dep.context, uuid)
        self.driver.destroy(uuid)
        self.driver.spawn(record, record.numa_topology,
                          base_xml=vmem_guest.base_xml(
                              self.kernel, self.initrd, self.serial))
        # The guest's driver plugs what the device starts with.
        self.assertEqual(({0: PLUGGED_MB}, True),
                         self.driver.resize_virtio_mem(
                             uuid, {0: PLUGGED_MB}, BOOT_S))
        return uuid

    def console_kb(self):
        """The guest node 0's MemTotal (kB) of each console line."""
        with open(self.serial, errors='replace') as f:
            return [int(kb) for kb in re.findall(r'VMEM 0=(\d+)', f.read())]

    def settled_kb(self):
        """The guest's MemTotal once three lines in a row agree (the
        guest prints one a second; it onlines plugged blocks between)."""
        deadline = time.monotonic() + CONSOLE_S
        while time.monotonic() < deadline:
            lines = self.console_kb()
            if len(lines) >= 3 and len(set(lines[-3:])) == 1:
                return lines[-1]
            time.sleep(0.5)
        self.fail(f"the guest's MemTotal did not settle: "
                  f"{self.console_kb()[-5:]}")

    def wait_console(self, expected_kb):
        # A test-only wait on the guest's console (one line a second).
        deadline = time.monotonic() + CONSOLE_S
        while time.monotonic() < deadline:
            lines = self.console_kb()
            if lines and lines[-1] == expected_kb:
                return
            time.sleep(0.5)
        self.fail(f"guest node 0 MemTotal {self.console_kb()[-3:]} kB, "
                  f"expected {expected_kb}")

    def assert_everywhere(self, uuid, plugged_mb, reported=True):
        """libvirt's live device, numamig's record of the guest and the
        host's report all say ``plugged_mb``. (``reported``: a memory
        change has recorded what the guest has plugged; before the
        first, the record does not know it.)"""
        xml = self.driver.get_domain_xml(uuid)
        for tag in ('requested', 'current'):
            self.assertIn(f"<{tag} unit='KiB'>{plugged_mb * KIB}</{tag}>",
                          xml)
        shown = self.json_of('instance', 'show', uuid, '--no-xml')
        (cell,) = shown['numa_topology']['cells']
        self.assertEqual((plugged_mb, plugged_mb if reported else None),
                         (cell['virtio_mem_requested_mb'],
                          cell['virtio_mem_current_mb']))
        host = self.json_of('host', 'show', HOST)
        (node,) = host['topology']['cells']
        self.assertEqual(BOOT_MB + plugged_mb, node['memory_usage_mb'])
        self.assertEqual({'0': {'devices': 1, 'reclaimable_mb': plugged_mb,
                                'growable_mb': DEVICE_MB - plugged_mb}},
                         host['virtio_mem'])

    def test_reclaim_on_the_node_then_give_back(self):
        uuid = self.create_guest()
        plugged_kb = self.settled_kb()
        self.assert_everywhere(uuid, PLUGGED_MB, reported=False)

        started = time.monotonic()
        change = self.json_of('host', 'reclaim', HOST, '--node', '0',
                              '--size', str(RECLAIM_MB), '--exact')
        reclaim_s = time.monotonic() - started
        self.assertEqual(('done', -RECLAIM_MB, -RECLAIM_MB, 0),
                         (change['status'], change['plan']['wanted_mb'],
                          change['plan']['on_node_mb'],
                          change['plan']['short_mb']))
        (guest,) = change['result']['guests']
        after_mb = PLUGGED_MB - RECLAIM_MB
        self.assertEqual((uuid, True, {'0': after_mb}, RECLAIM_MB),
                         (guest['instance'], guest['reached'],
                          guest['current'], guest['released_mb']))
        self.assertEqual((RECLAIM_MB, True),
                         (change['result']['released_mb'],
                          change['result']['all_reached']))
        # The guest kernel lost exactly what was reclaimed.
        self.wait_console(plugged_kb - RECLAIM_MB * KIB)
        self.assert_everywhere(uuid, after_mb)

        started = time.monotonic()
        change = self.json_of('instance', 'memory', 'set', uuid,
                              '--host-node', '0', '--size', str(PLUGGED_MB))
        give_back_s = time.monotonic() - started
        self.assertEqual(('done', RECLAIM_MB, 0),
                         (change['status'], change['plan']['on_node_mb'],
                          change['plan']['short_mb']))
        (guest,) = change['result']['guests']
        self.assertEqual((True, {'0': PLUGGED_MB}),
                         (guest['reached'], guest['current']))
        self.wait_console(plugged_kb)
        self.assert_everywhere(uuid, PLUGGED_MB)
        print(f"host reclaim {RECLAIM_MB} MiB: {reclaim_s:.1f} s; "
              f"give back: {give_back_s:.1f} s")
