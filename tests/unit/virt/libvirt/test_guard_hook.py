"""Tests of the migration guard as libvirt runs it (guard_hook.main)."""

import io
import os
import time

from numamig.virt.libvirt import guard_hook
from numamig.virt.libvirt import guest_parse
from tests.unit.virt.libvirt import guard_base as gb
from tests.unit.virt.libvirt.guard_base import NOW


class HookTest(gb.GuardTestCase):

    def _run(self, operation='migrate', stdin=None, when_unknown='pass',
             deadline=5.0, now=NOW, extra_args=()):
        self.stdout, self.stderr = io.StringIO(), io.StringIO()
        argv = ['--claims-file', self.claims_file, '--max-age', '60',
                '--when-unknown', when_unknown, '--deadline', str(deadline),
                '--log-file', self.settings.log_file, *extra_args,
                '--', 'nm-pinned', operation, 'begin', '-']
        if stdin is None:
            stdin = io.BytesIO(gb.source_xml().encode())
        return guard_hook.main(argv, stdin, self.stdout, self.stderr,
                               now=now)

    def _log(self):
        with open(self.settings.log_file) as f:
            return f.read()

    def test_migrate_prints_the_rewritten_xml(self):
        self.publish()
        self.assertEqual(0, self._run())
        info = guest_parse.extract_numa_info(self.stdout.getvalue())
        self.assertEqual({0: {6}, 1: {7}, 2: {14}, 3: {15}}, info.cpu_pins)
        self.assertIn('incoming migration of nm-pinned: rewritten',
                      self._log())
        self.assertIn('vcpupin 0: cpuset=2 -> cpuset=6', self._log())

    def test_a_refusal_exits_1_with_the_reason_on_stderr(self):
        self.publish({gb.GUEST: gb.claim(pagesizes={})})
        self.assertEqual(1, self._run())
        self.assertEqual('', self.stdout.getvalue())
        self.assertIn('numamig migration guard: cannot be reconciled',
                      self.stderr.getvalue())
        self.assertIn('refused', self._log())

    def test_missing_claims_pass_by_default_and_say_so(self):
        self.assertEqual(0, self._run())
        self.assertEqual('', self.stdout.getvalue())
        self.assertIn('claims unknown, XML passed through unchecked',
                      self._log())

    def test_missing_claims_refused_when_asked(self):
        self.assertEqual(1, self._run(when_unknown='refuse'))
        self.assertIn('does not exist', self.stderr.getvalue())

    def test_other_operations_exit_0_and_read_nothing(self):
        stdin = io.BytesIO(b'not even xml')
        for operation in ('prepare', 'start', 'started', 'stopped',
                          'release', 'reconnect', 'attach', 'restore'):
            self.assertEqual(0, self._run(operation, stdin,
                                          when_unknown='refuse'))
        self.assertEqual(0, stdin.tell())
        self.assertFalse(os.path.exists(self.settings.log_file))

    def test_unusable_arguments_never_fail_libvirt(self):
        stdout, stderr = io.StringIO(), io.StringIO()
        status = guard_hook.main(['--max-age', 'soon', '--', 'g',
                                  'reconnect', 'begin', '-'],
                                 io.BytesIO(b''), stdout, stderr)
        self.assertEqual(0, status)
        self.assertIn('unusable arguments', stderr.getvalue())

    def test_unwritable_log_goes_to_stderr(self):
        self.settings_log = os.path.join(self.directory, 'no', 'such.log')
        self.publish()
        self.assertEqual(0, self._run(
            extra_args=['--log-file', self.settings_log]))
        self.assertIn('cannot append to', self.stderr.getvalue())
        self.assertIn('rewritten', self.stderr.getvalue())


class DeadlineTest(gb.GuardTestCase):
    """The hook's own time bound: an input that never ends (a hung file
    system would block the same way) gets the when_unknown answer."""

    def _blocking_stdin(self):
        read_end, write_end = os.pipe()
        self.addCleanup(os.close, write_end)
        stdin = os.fdopen(read_end, 'rb')
        self.addCleanup(stdin.close)
        return stdin

    def _run(self, when_unknown):
        self.stderr = io.StringIO()
        started = time.monotonic()
        status = guard_hook.main(
            ['--claims-file', self.claims_file, '--max-age', '60',
             '--when-unknown', when_unknown, '--deadline', '0.2', '--',
             'g', 'migrate', 'begin', '-'],
            self._blocking_stdin(), io.StringIO(), self.stderr)
        return status, time.monotonic() - started

    def test_past_the_deadline_the_xml_passes(self):
        status, elapsed = self._run('pass')
        self.assertEqual(0, status)
        self.assertIn("no decision within the guard's deadline of 0.2 s",
                      self.stderr.getvalue())
        # The answer comes at the deadline, not whenever the input ends
        # (never, here); the margin only absorbs a loaded machine.
        self.assertLess(elapsed, 5)

    def test_past_the_deadline_refused_when_asked(self):
        status, _elapsed = self._run('refuse')
        self.assertEqual(1, status)
        self.assertIn('deadline', self.stderr.getvalue())
