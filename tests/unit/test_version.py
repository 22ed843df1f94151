"""Tests of numamig.version: what --version prints."""

import contextlib
import io

from numamig import version
from numamig.cmd import manage
from tests import base


class VersionTest(base.TestCase):

    def test_the_package_metadata_version(self):
        from importlib import metadata
        self.assertEqual(metadata.version('numamig'),
                         version.version_string())

    def test_manage_prints_it(self):
        out = io.StringIO()
        with contextlib.redirect_stdout(out), \
                contextlib.redirect_stderr(out):
            try:
                manage.main(['--version'])
            except SystemExit as exc:
                self.assertEqual(0, exc.code)
        self.assertEqual(version.version_string(), out.getvalue().strip())
