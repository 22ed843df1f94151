"""Dirty-rate sampling: modes tried in turn, a deadline, honest unknown."""

import libvirt

from numamig.convergence import policy as pol
from numamig.virt.libvirt import dirty_rate
from tests import base
from tests import libvirt_settings
from tests.unit.virt.libvirt import test_migration as tm

MIB = 2 ** 20


class FakeClock:
    def __init__(self):
        self.now = 0.0
        self.sleeps = []

    def __call__(self):
        return self.now

    def sleep(self, seconds):
        self.sleeps.append(seconds)
        self.now += seconds


class Dom:
    """Refuses the modes in ``refused``; measures after ``looks``."""

    def __init__(self, refused=(), looks=1, rate=42):
        self.refused, self.looks, self.rate = refused, looks, rate
        self.started = []

    def UUIDString(self):  # noqa: N802
        return 'u'

    def startDirtyRateCalc(self, seconds, flags):  # noqa: N802
        if flags in self.refused:
            raise tm._libvirt_error(libvirt.VIR_ERR_NO_SUPPORT,
                                    f'mode {flags} unsupported')
        self.started.append((seconds, flags))


class Conn:
    def __init__(self, dom):
        self.dom, self.calls = dom, 0

    def domainListGetStats(self, doms, stats):  # noqa: N802
        self.calls += 1
        measured = self.calls >= self.dom.looks
        return [(doms[0], {
            'dirtyrate.calc_status': dirty_rate.MEASURED if measured else 1,
            'dirtyrate.megabytes_per_second': self.dom.rate})]


PAGE, BITMAP, RING = (m[1] for m in dirty_rate.MODES)


class SampleTestCase(base.TestCase):

    def _sample(self, dom, deadline_s=10):
        clock = FakeClock()
        return dirty_rate.sample(Conn(dom), dom, deadline_s=deadline_s,
                                 clock=clock, sleep=clock.sleep), clock

    def test_page_sampling_first(self):
        dom = Dom()
        (rate, mode), clock = self._sample(dom)
        self.assertEqual((42 * MIB, 'page-sampling'), (rate, mode))
        self.assertEqual([(1, PAGE)], dom.started)
        self.assertEqual([1], clock.sleeps)

    def test_falls_back_to_the_next_mode(self):
        dom = Dom(refused=(PAGE,))
        (rate, mode), _ = self._sample(dom)
        self.assertEqual('dirty-bitmap', mode)

    def test_unknown_names_every_refusal(self):
        dom = Dom(refused=(PAGE, BITMAP, RING))
        (rate, why), _ = self._sample(dom)
        self.assertIsNone(rate)
        for name in ('page-sampling', 'dirty-bitmap', 'dirty-ring'):
            self.assertIn(f"{name}: mode", why)

    def test_waits_with_growing_delays_until_the_deadline(self):
        dom = Dom(looks=10 ** 6)
        (rate, why), clock = self._sample(dom, deadline_s=2)
        self.assertIsNone(rate)
        self.assertIn('no result within 2 s', why)
        # Per mode: its 1 s, then 0.05, 0.1, 0.2, 0.4 (within 2 s).
        self.assertEqual([1, 0.05, 0.1, 0.2, 0.4] * 3, clock.sleeps)

    def test_measured_after_a_few_looks(self):
        (rate, mode), clock = self._sample(Dom(looks=3))
        self.assertEqual(42 * MIB, rate)
        self.assertEqual([1, 0.05, 0.1], clock.sleeps)


class ModesTestCase(base.TestCase):

    def test_tcg_tries_page_sampling_only(self):
        self.assertEqual(['page-sampling'],
                         [n for n, _ in dirty_rate.modes_for('qemu')])
        self.assertEqual(3, len(dirty_rate.modes_for('kvm')))

    def test_only_the_given_modes(self):
        dom = Dom(refused=(PAGE,))
        clock = FakeClock()
        rate, why = dirty_rate.sample(Conn(dom), dom, clock=clock,
                                      sleep=clock.sleep,
                                      modes=dirty_rate.modes_for('qemu'))
        self.assertIsNone(rate)
        self.assertEqual([], dom.started)
        self.assertNotIn('dirty-bitmap', why)


class PredictionDictTestCase(base.TestCase):

    def test_figures_from_the_settings(self):
        settings = libvirt_settings.migration(bandwidth_mib=100,
                                                 downtime_ms=300)
        answer = dirty_rate.prediction(settings, pol.SHIPPED[pol.TIMER],
                                       2 ** 30, 50 * MIB, 'page-sampling')
        self.assertEqual(('converges', 160, 50 * MIB),
                         (answer['prediction'],
                          answer['predicted_downtime_ms'],
                          answer['sampled_dirty_rate']))

    def test_unknown_says_why(self):
        settings = libvirt_settings.migration(bandwidth_mib=100)
        answer = dirty_rate.prediction(settings, pol.SHIPPED[pol.NFV],
                                       2 ** 30, None, 'page-sampling: no')
        self.assertEqual(('unknown', None), (answer['prediction'],
                                             answer['dirty_rate_method']))
        self.assertIn('(page-sampling: no)', answer['reason'])


class ManyDom(Dom):
    def __init__(self, uuid, refused=(), looks=1, rate=42):
        super().__init__(refused, looks, rate)
        self.uuid = uuid

    def UUIDString(self):  # noqa: N802
        return self.uuid


class ManyConn:
    """Answers each guest's statistics once it was looked at its
    ``looks`` times; counts the calls (one per look for all)."""

    def __init__(self):
        self.calls = 0
        self.seen = {}

    def domainListGetStats(self, doms, stats):  # noqa: N802
        self.calls += 1
        out = []
        for dom in doms:
            self.seen[dom.uuid] = self.seen.get(dom.uuid, 0) + 1
            measured = self.seen[dom.uuid] >= dom.looks
            out.append((dom, {
                'dirtyrate.calc_status':
                    dirty_rate.MEASURED if measured else 1,
                'dirtyrate.megabytes_per_second': dom.rate}))
        return out


class SampleManyTestCase(base.TestCase):

    def test_every_guest_in_one_window_and_one_look(self):
        clock = FakeClock()
        conn = ManyConn()
        doms = [ManyDom('a', rate=0), ManyDom('b', rate=6),
                ManyDom('c', rate=32)]
        found = dirty_rate.sample_many(conn, doms, seconds=1, clock=clock,
                                       sleep=clock.sleep)
        self.assertEqual({'a': (0, 'page-sampling'),
                          'b': (6 * MIB, 'page-sampling'),
                          'c': (32 * MIB, 'page-sampling')}, found)
        # One window for all of them, one statistics call.
        self.assertEqual([1], clock.sleeps)
        self.assertEqual(1, conn.calls)
        self.assertEqual([[(1, PAGE)]] * 3, [d.started for d in doms])

    def test_a_guest_refused_a_mode_tries_the_next_alone(self):
        clock = FakeClock()
        doms = [ManyDom('a', rate=4), ManyDom('b', refused=(PAGE,),
                                              rate=8)]
        found = dirty_rate.sample_many(ManyConn(), doms, clock=clock,
                                       sleep=clock.sleep)
        self.assertEqual((4 * MIB, 'page-sampling'), found['a'])
        self.assertEqual((8 * MIB, 'dirty-bitmap'), found['b'])
        self.assertEqual([(1, PAGE)], doms[0].started)
        self.assertEqual([(1, BITMAP)], doms[1].started)

    def test_unmeasured_within_the_deadline_is_unknown_with_why(self):
        clock = FakeClock()
        doms = [ManyDom('a', rate=4), ManyDom('b', looks=10 ** 6)]
        found = dirty_rate.sample_many(ManyConn(), doms, deadline_s=3,
                                       clock=clock, sleep=clock.sleep,
                                       modes=dirty_rate.MODES[:1])
        self.assertEqual((4 * MIB, 'page-sampling'), found['a'])
        rate, why = found['b']
        self.assertIsNone(rate)
        self.assertIn('page-sampling: no result within 3 s', why)
        self.assertLessEqual(clock.now, 3 + 1e-9)

    def test_every_mode_refused_says_each(self):
        clock = FakeClock()
        doms = [ManyDom('a', refused=(PAGE, BITMAP, RING))]
        rate, why = dirty_rate.sample_many(ManyConn(), doms, clock=clock,
                                           sleep=clock.sleep)['a']
        self.assertIsNone(rate)
        for name in ('page-sampling', 'dirty-bitmap', 'dirty-ring'):
            self.assertIn(f'{name}: mode', why)
        # Nothing started: no window waited.
        self.assertEqual([], clock.sleeps)

    def test_figures_follow_the_settings(self):
        settings = libvirt_settings.migration(
            downtime_ms=300, completion_timeout_s=200,
            timeout_action='force_complete', permit_post_copy=True)
        self.assertEqual({'downtime_ms': 300, 'timeout_s_per_gib': 200,
                          'timer_tiers': [pol.POST_COPY]},
                         dirty_rate.figures(settings))
        aborting = libvirt_settings.migration(timeout_action='abort')
        self.assertEqual([], dirty_rate.figures(aborting)['timer_tiers'])
