"""tools/stestr_times.py: the durations CI seeds stestr with."""

import importlib.util
import io
import os

import fixtures

from tests import base

_PATH = os.path.join(os.path.dirname(__file__), '..', '..', 'tools',
                     'stestr_times.py')
_spec = importlib.util.spec_from_file_location('stestr_times', _PATH)
stestr_times = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(stestr_times)


class StestrTimesTest(base.TestCase):

    def _file(self, text):
        path = os.path.join(self.useFixture(fixtures.TempDir()).path, 'h')
        with open(path, 'w') as f:
            f.write(text)
        return path

    def test_the_stream_carries_each_duration(self):
        hints = stestr_times.read_hints(self._file(
            "# measured\n280 tests.a.Slow.test_x\n\n8.5 tests.b.T.test_y  "
            "# comment\n"))
        self.assertEqual([(280.0, 'tests.a.Slow.test_x'),
                          (8.5, 'tests.b.T.test_y')], hints)
        out = io.BytesIO()
        stestr_times.write_stream(hints, out)
        out.seek(0)
        self.assertEqual([(280.0, 'tests.a.Slow.test_x')],
                         stestr_times.list_slow(out, 10))

    def test_a_bad_line_is_named(self):
        path = self._file("280 tests.a\nslow tests.b\n")
        exc = self.assertRaises(ValueError, stestr_times.read_hints, path)
        self.assertIn(':2:', str(exc))

    def test_the_shipped_file_reads(self):
        hints = stestr_times.read_hints(os.path.join(
            os.path.dirname(_PATH), 'slow-tests.txt'))
        self.assertTrue(all(seconds > 0 and test_id.startswith('tests.')
                            for seconds, test_id in hints), hints)
