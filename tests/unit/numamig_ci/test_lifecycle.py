"""StartStop: stopped on exit, and on a start that fails halfway."""

from numamig_ci import lifecycle
from tests import base


class _Thing(lifecycle.StartStop):

    def __init__(self, fail_with=None):
        self.calls = []
        self.fail_with = fail_with

    def start(self):
        self.calls.append('start')
        if self.fail_with:
            raise self.fail_with

    def stop(self):
        self.calls.append('stop')


class StartStopTest(base.TestCase):

    def test_started_then_stopped(self):
        thing = _Thing()
        with thing as entered:
            self.assertIs(thing, entered)
            self.assertEqual(['start'], thing.calls)
        self.assertEqual(['start', 'stop'], thing.calls)

    def test_failed_start_is_stopped_and_raised(self):
        for error in (RuntimeError("libvirtd did not start"),
                      KeyboardInterrupt()):
            thing = _Thing(fail_with=error)
            with self.assertRaises(type(error)):
                with thing:
                    self.fail("the body must not run")
            self.assertEqual(['start', 'stop'], thing.calls)
