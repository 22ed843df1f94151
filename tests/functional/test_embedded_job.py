"""The embedded main job, run whole as ``numamig-embedded`` runs it."""

import contextlib
import io
import json
import time

from numamig.cmd import embedded
from tests import base


class EmbeddedJobTestCase(base.TestCase):

    def test_main_job_passes_quickly(self):
        out = io.StringIO()
        start = time.monotonic()
        with contextlib.redirect_stdout(out):
            code = embedded.main(['--format', 'json'])
        elapsed = time.monotonic() - start
        data = json.loads(out.getvalue())
        failed = [(s['title'], c) for s in data['scenarios']
                  for c in s['checks'] if not c['passed']]
        self.assertEqual([], failed)
        self.assertEqual((0, True, 3), (code, data['passed'],
                                        len(data['scenarios'])))
        self.assertLess(elapsed, 45)
        self.assertTrue(data['verdict'].startswith('VERDICT: PASS'))
        for scenario in data['scenarios']:
            self.assertNotEqual(scenario['source'], scenario['dest'])


class DrainShowcaseTestCase(base.TestCase):

    def test_the_drain_showcase_passes(self):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            code = embedded.main(['--drain', '--format', 'json'])
        data = json.loads(out.getvalue())
        failed = [c for c in data['checks'] if not c['passed']]
        self.assertEqual((0, True, []), (code, data['passed'], failed))
        self.assertEqual(6, len(data['checks']))
        self.assertEqual(('completed', 2), (data['drain']['status'],
                                            data['drain']['report']['moved']))
