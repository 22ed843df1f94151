"""Tests of numamig.cmd.daemon: a daemon that cannot start says why."""

import contextlib
import io

from numamig import exception
from numamig.cmd import daemon
from tests import base


class StartTest(base.TestCase):

    def _start(self, body):
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            code = daemon.start('numamig-conductor', body)
        return code, err.getvalue()

    def _raises(self, exc):
        def body():
            raise exc
        return body

    def test_bad_option_is_one_line(self):
        code, err = self._start(self._raises(exception.InvalidConfiguration(
            option='[DEFAULT] report_interval', reason='must be an integer')))
        self.assertEqual(daemon.EXIT_CANNOT_START, code)
        self.assertEqual(['numamig-conductor cannot start: Invalid '
                          'configuration option [DEFAULT] report_interval: '
                          'must be an integer'], err.splitlines())

    def test_unsynced_database_is_one_line(self):
        code, err = self._start(self._raises(exception.DatabaseNotSynced(
            url='sqlite:///x', current='none', head='release2')))
        self.assertEqual(daemon.EXIT_CANNOT_START, code)
        self.assertIn("numamig-manage db sync", err)
        self.assertEqual(1, len(err.splitlines()))

    def test_a_bug_still_propagates(self):
        self.assertRaises(ZeroDivisionError, self._start,
                          self._raises(ZeroDivisionError()))

    def test_a_clean_run_returns_its_code(self):
        self.assertEqual((0, ''), self._start(lambda: 0))
