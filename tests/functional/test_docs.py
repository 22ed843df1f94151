"""The documentation builds with every warning an error (tox -e docs).

The reference pages are generated from the code (options, command-line
help, the package map), so a change there that breaks a page fails here.
"""

import os
import subprocess
import sys

import fixtures

from tests import base

TOP = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..'))


class DocsBuildTest(base.TestCase):

    def test_builds_without_warnings(self):
        out = self.useFixture(fixtures.TempDir()).path
        done = subprocess.run(
            [sys.executable, '-m', 'sphinx', '-W', '--keep-going', '-q',
             '-b', 'html', os.path.join(TOP, 'doc', 'source'), out],
            capture_output=True, text=True, timeout=300, cwd=TOP)
        self.assertEqual(0, done.returncode, done.stderr[-3000:])
        with open(os.path.join(out, 'cli.html'), encoding='utf-8') as page:
            self.assertIn('numamig-manage migration start', page.read())
        with open(os.path.join(out, 'architecture.html'),
                  encoding='utf-8') as page:
            self.assertIn('conductor.rpcapi', page.read())
