"""The destination's watch over an incoming migration's threads."""

import threading

from numamig.virt.libvirt import incoming_threads as it
from tests import base
from tests import libvirt_settings

UUID = '5a1e0000-aaaa-4bbb-8ccc-000000000001'


class FakePinner:
    """Finds the QEMU on the ``appears``-th poll; it exits when told."""

    def __init__(self, appears=2, cpus=frozenset({3})):
        self.cpus = frozenset(cpus)
        self.pid = None
        self.polls = 0
        self.appears = appears
        self.exited = False
        self.threads = {}
        self.polled = threading.Event()

    def poll(self):
        self.polls += 1
        if self.polls >= self.appears:
            self.pid = 99
            self.threads = {'multifdrecv_0': sorted(self.cpus)}
        self.polled.set()

    def alive(self):
        return not self.exited


class WatchTestCase(base.TestCase):

    def _watch(self, pinner, limit_s=60, clock=None):
        self.ended = []
        watch = it.IncomingWatch(UUID, 'dst', (pinner.cpus, 'housekeeping'),
                                 0.01, limit_s, self.ended.append,
                                 pinner=pinner,
                                 **({'clock': clock} if clock else {}))
        self.addCleanup(watch.stop)
        return watch.start()

    def _wait_for_polls(self, pinner, count):
        for _ in range(1000):
            if pinner.polls >= count:
                return
            pinner.polled.wait(0.1)
            pinner.polled.clear()
        self.fail(f"only {pinner.polls} polls")

    def test_stopped_hands_over_its_record_once(self):
        pinner = FakePinner()
        watch = self._watch(pinner)
        self._wait_for_polls(pinner, 3)
        watch.stop()
        watch.stop()
        self.assertEqual([{'host': 'dst', 'basis': 'housekeeping',
                           'cpus': [3], 'connections': None,
                           'threads': {'multifdrecv_0': [3]}}],
                         self.ended)
        self.assertEqual('stopped', watch.ended_by)

    def test_ends_by_itself_when_its_qemu_exits(self):
        pinner = FakePinner()
        watch = self._watch(pinner)
        self._wait_for_polls(pinner, 3)
        pinner.exited = True
        watch._thread.join(5)
        self.assertEqual(('QEMU exited', 1),
                         (watch.ended_by, len(self.ended)))

    def test_ends_at_its_time_limit(self):
        now = [0.0]

        def clock():
            now[0] += 1.0
            return now[0]
        pinner = FakePinner(appears=10 ** 6)
        watch = self._watch(pinner, limit_s=5, clock=clock)
        watch._thread.join(5)
        self.assertEqual('time limit of 5 s', watch.ended_by)
        self.assertEqual(1, len(self.ended))
        self.assertEqual({}, self.ended[0]['threads'])

    def test_a_failing_report_does_not_escape(self):
        pinner = FakePinner()
        watch = it.IncomingWatch(UUID, 'dst', (pinner.cpus, 'none'), 0.01,
                                 60, self._refuse, pinner=pinner).start()
        self._wait_for_polls(pinner, 1)
        with self.assertLogs('numamig.virt.libvirt.incoming_threads',
                             'WARNING') as logs:
            watch.stop()
        self.assertIn('was not recorded: conductor gone', logs.output[0])

    @staticmethod
    def _refuse(record):
        raise RuntimeError('conductor gone')


class TimeLimitTestCase(base.TestCase):

    def test_scaled_like_the_source_plus_recovery(self):
        settings = libvirt_settings.migration(completion_timeout_s=800)
        self.assertEqual(
            800 * 4 + settings.postcopy_recovery.timeout_s,
            it.time_limit(settings, 4096))
        self.assertEqual(
            800 + settings.postcopy_recovery.timeout_s,
            it.time_limit(settings, 512))

    def test_no_timeout_still_bounded(self):
        settings = libvirt_settings.migration(completion_timeout_s=0)
        self.assertEqual(it.UNLIMITED_S, it.time_limit(settings, 4096))
