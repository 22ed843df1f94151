"""tools/test_report.py: per-tier counts and the intended-skip check."""

import configparser
import fnmatch
import importlib.util
import io
import os
import re

import fixtures
from subunit import v2

from tests import base

_TOP = os.path.join(os.path.dirname(__file__), '..', '..')
_spec = importlib.util.spec_from_file_location(
    'test_report', os.path.join(_TOP, 'tools', 'test_report.py'))
test_report = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(test_report)

OPT_IN = """
intended_skips:
  - tests: ^tests\\.functional\\.libvirt\\.test_real_x\\.
    reason: ^opt-in. set X=1$
    why: it is slow
    how: X=1 bash tools/dev.sh test
"""


def stream(*tests):
    """A subunit v2 stream of (test id, status, skip reason)."""
    out = io.BytesIO()
    writer = v2.StreamResultToBytes(out)
    for test_id, status, reason in tests:
        writer.status(test_id=test_id, test_status='inprogress')
        if reason:
            writer.status(test_id=test_id, file_name='reason',
                          file_bytes=reason.encode(),
                          mime_type='text/plain; charset=utf8', eof=True)
        writer.status(test_id=test_id, test_status=status)
    out.seek(0)
    return out


def failing(test_id, traceback):
    """A subunit v2 stream of one failed test with its traceback."""
    out = io.BytesIO()
    writer = v2.StreamResultToBytes(out)
    writer.status(test_id=test_id, test_status='inprogress')
    writer.status(test_id=test_id, file_name='traceback',
                  file_bytes=traceback.encode(),
                  mime_type='text/x-traceback; charset=utf8', eof=True)
    writer.status(test_id=test_id, test_status='fail')
    out.seek(0)
    return out


class TestReportTest(base.TestCase):

    def setUp(self):
        super().setUp()
        self.top = self.useFixture(fixtures.TempDir()).path

    def _list(self, text=OPT_IN):
        path = os.path.join(self.top, 'skips.yaml')
        with open(path, 'w') as f:
            f.write(text)
        return path

    def _run(self, source, *extra, text=OPT_IN):
        out = io.StringIO()
        self.useFixture(fixtures.MonkeyPatch('sys.stdout', out))
        self.useFixture(fixtures.MonkeyPatch(
            'sys.stdin', io.TextIOWrapper(source)))
        code = test_report.main([*extra, self._list(text)])
        return code, out.getvalue()

    def test_tiers_counted_from_the_test_ids(self):
        results = test_report.read_results(stream(
            ('tests.unit.numa.test_fit.T.test_a', 'success', ''),
            ('tests.functional.test_rpc.T.test_b(rabbit)', 'fail', ''),
            ('tests.functional.test_multiprocess.T.test_c', 'success', ''),
            ('tests.functional.libvirt.test_real_x.T.test_d', 'skip',
             'opt-in: set X=1'),
            ('tests.functional.test_ci_nested.T.test_e', 'success', '')))
        counts, by_entry, unintended, stale = test_report.judge(
            results, test_report.load_intended(self._list()))
        self.assertEqual(
            {'unit': (1, 0, 0), 'embedded': (0, 1, 0),
             'multiprocess': (1, 0, 0), 'real': (0, 0, 1),
             'nested': (1, 0, 0), 'other': (0, 0, 0)},
            {name: (c['passed'], c['failed'], c['skipped'])
             for name, c in counts.items()})
        self.assertEqual(({1: 1}, [], []), (dict(by_entry), unintended,
                                             stale))

    def test_an_intended_skip_passes_and_says_how_to_run_it(self):
        code, out = self._run(stream(
            ('tests.functional.libvirt.test_real_x.T.test_d', 'skip',
             'opt-in: set X=1')))
        self.assertEqual(0, code, out)
        self.assertIn('intended skip x1: it is slow (to run: X=1 bash '
                      'tools/dev.sh test)', out)

    def test_a_missing_package_is_no_reason(self):
        # The opt-in test, skipped for another reason than its opt-in.
        code, out = self._run(stream(
            ('tests.functional.libvirt.test_real_x.T.test_d', 'skip',
             'debootstrap is not installed'),
            ('tests.functional.test_ci_nested.T.test_e', 'skip',
             'the nested hosts need root')))
        self.assertEqual(1, code, out)
        self.assertIn('UNINTENDED SKIP tests.functional.libvirt.test_real_x.'
                      'T.test_d: debootstrap is not installed', out)
        self.assertIn('UNINTENDED SKIP tests.functional.test_ci_nested.T.'
                      'test_e: the nested hosts need root', out)

    def test_an_entry_naming_no_test_is_stale_unless_filtered(self):
        source = stream(('tests.unit.T.test_a', 'success', ''))
        code, out = self._run(source)
        self.assertEqual(1, code, out)
        self.assertIn('STALE intended-skip entry 1', out)
        code, out = self._run(stream(('tests.unit.T.test_a', 'success',
                                      '')), '--partial')
        self.assertEqual(0, code, out)

    def test_an_entry_without_its_reasons_is_refused(self):
        err = io.StringIO()
        self.useFixture(fixtures.MonkeyPatch('sys.stderr', err))
        code, _ = self._run(stream(), text="intended_skips:\n  - tests: x\n"
                                           "    reason: y\n")
        self.assertEqual(2, code)
        self.assertIn('entry 1 must have exactly the keys how, reason, '
                      'tests, why', err.getvalue())

    def test_the_checked_in_list_reads(self):
        entries = test_report.load_intended(
            os.path.join(_TOP, 'tests', 'intended-skips.yaml'))
        self.assertTrue(entries)
        for entry in entries:
            # Opt-ins only: each says how to run it, with a variable.
            self.assertRegex(entry['how'], r'NUMAMIG_\w+=')

    def test_tox_passes_every_opt_in_variable(self):
        # A variable tox drops turns its opt-in into a skip under tox
        # while the same command sets it.
        entries = test_report.load_intended(
            os.path.join(_TOP, 'tests', 'intended-skips.yaml'))
        wanted = {name for entry in entries
                  for name in re.findall(r'NUMAMIG_\w+', entry['how'])}
        tox = configparser.ConfigParser(interpolation=None)
        tox.read(os.path.join(_TOP, 'tox.ini'))
        passed = tox['testenv']['passenv'].split()
        self.assertTrue(wanted)
        self.assertEqual(set(), {name for name in wanted if not any(
            fnmatch.fnmatchcase(name, pattern) for pattern in passed)})

    def test_a_failed_test_is_named_with_its_last_traceback_line(self):
        # CI shows the tail of the run: it must say which test failed.
        test_id = 'tests.functional.faults.test_outages.T.test_cut'
        code, out = self._run(
            failing(test_id, 'Traceback (most recent call last):\n'
                             '  File "x.py", line 1\n'
                             'AssertionError: settled in 80 s\n'),
            '--partial')
        self.assertIn(f"FAILED {test_id}: AssertionError: settled in 80 s",
                      out.splitlines())
        self.assertEqual(0, code)

    def test_failures_come_after_the_intended_skips(self):
        # CI keeps a long run's tail: the skips' explanations must not
        # push the failed tests' names out of it.
        skipped = 'tests.functional.libvirt.test_real_x.T.test_slow'
        failed = 'tests.functional.faults.test_outages.T.test_cut'
        both = io.BytesIO(
            stream((skipped, 'skip', 'opt-in. set X=1')).read() +
            failing(failed, 'AssertionError: settled in 80 s\n').read())
        code, out = self._run(both, '--partial')
        lines = out.splitlines()
        skip_at = next(i for i, line in enumerate(lines)
                       if line.startswith('intended skip x1: '))
        fail_at = lines.index(
            f"FAILED {failed}: AssertionError: settled in 80 s")
        self.assertLess(skip_at, fail_at)
        self.assertEqual(0, code)
