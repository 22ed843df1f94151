"""Tests of the guard's hook installation, and of the shim as libvirt runs
it (a real process reading the XML on stdin)."""

import os
import stat
import subprocess

from numamig.virt.libvirt import guard_install
from numamig.virt.libvirt import guest_parse
from tests.unit.virt.libvirt import guard_base as gb


class InstallTest(gb.GuardTestCase):

    def _install(self):
        return guard_install.install(self.settings, 'dst')

    def test_writes_an_executable_shim_once(self):
        self.assertEqual((guard_install.ON, True), self._install())
        mode = stat.S_IMODE(os.stat(self.settings.hook_path).st_mode)
        self.assertEqual(0o755, mode)
        self.assertEqual((guard_install.ON, False), self._install())
        self.assertEqual(['numamig'], os.listdir(os.path.dirname(
            self.settings.hook_path)))

    def test_rewrites_its_own_shim_when_settings_change(self):
        self._install()
        self.settings = self.settings.__class__(
            **dict(vars(self.settings), when_unknown='refuse'))
        self.assertEqual((guard_install.ON, True), self._install())
        with open(self.settings.hook_path) as f:
            self.assertIn('--when-unknown refuse', f.read())

    def test_never_overwrites_a_foreign_hook(self):
        os.makedirs(os.path.dirname(self.settings.hook_path))
        with open(self.settings.hook_path, 'w') as f:
            f.write('#!/bin/sh\necho operator hook\n')
        self.assertEqual((guard_install.FAILED, False), self._install())
        with open(self.settings.hook_path) as f:
            self.assertIn('operator hook', f.read())

    def test_unwritable_path_fails(self):
        os.makedirs(os.path.dirname(self.settings.hook_path))
        os.mkdir(self.settings.hook_path)  # a directory in its place
        self.assertEqual(guard_install.FAILED, self._install()[0])

    def _hook(self, operation, stdin):
        # As libvirtd runs it: a sanitised environment, its own cwd.
        return subprocess.run(
            [self.settings.hook_path, 'nm-pinned', operation, 'begin', '-'],
            input=stdin, capture_output=True, timeout=60, cwd='/',
            env={'PATH': '/usr/bin:/bin', 'LC_ALL': 'C'})

    def test_the_shim_runs_the_guard_as_libvirt_would(self):
        self._install()
        self.publish(written_at=None)
        result = self._hook('migrate', gb.source_xml().encode())
        self.assertEqual(0, result.returncode, result.stderr)
        info = guest_parse.extract_numa_info(result.stdout.decode())
        self.assertEqual({0: {6}, 1: {7}, 2: {14}, 3: {15}}, info.cpu_pins)
        with open(self.settings.log_file) as f:
            self.assertIn('rewritten', f.read())

    def test_the_shim_passes_other_operations_without_python(self):
        self._install()
        # No claims file and a refusing guard: only Python would fail.
        self.settings = self.settings.__class__(
            **dict(vars(self.settings), when_unknown='refuse'))
        self._install()
        big = b'<domain>' + b' ' * (1 << 20) + b'</domain>'
        for operation in ('prepare', 'start', 'reconnect', 'release'):
            result = self._hook(operation, big)
            self.assertEqual((0, b'', b''), (result.returncode,
                                             result.stdout, result.stderr))
        self.assertFalse(os.path.exists(self.settings.log_file))
        self.assertEqual(1, self._hook('migrate', big).returncode)
