"""The agent's standing dirty-rate samples (numamig.compute.dirty_rates):
a drain's estimate answered from samples young enough, the rest
measured, and the periodic sampler that keeps them."""

from unittest import mock

from numamig.compute import dirty_rates
from tests import base

A = '00000000-0000-4000-8000-00000000000a'
B = '00000000-0000-4000-8000-00000000000b'
C = '00000000-0000-4000-8000-00000000000c'
FIGURES = {'downtime_ms': 500}


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


class FakeDriver:
    """Answers sample_dirty_rates with each guest's rate; records the
    guests each call measured."""

    def __init__(self, rates, guests=None):
        self.rates = dict(rates)
        self.guests = guests if guests is not None else list(rates)
        self.calls = []

    def list_guests(self):
        return {uuid: f'guest-{uuid[-1]}' for uuid in self.guests}

    def sample_dirty_rates(self, uuids, seconds=1):
        self.calls.append(list(uuids))
        return {'guests': {u: {'dirty_rate': self.rates[u],
                               'method': 'page-sampling', 'reason': None,
                               'memory': 128}
                           for u in uuids if u in self.rates},
                'figures': FIGURES}


class SampleTest(base.TestCase):

    def setUp(self):
        super().setUp()
        self.clock = Clock()
        self.book = dirty_rates.DirtyRateBook(clock=self.clock)
        self.driver = FakeDriver({A: 0, B: 6 << 20, C: 12 << 20})

    def test_no_max_age_measures_every_guest(self):
        dirty_rates.sample_all(self.driver, self.book, set, 1, 256)
        self.clock.now += 5
        answer = dirty_rates.sample(self.driver, self.book, [A, B], 1, 0)
        self.assertEqual([[A, B, C], [A, B]], self.driver.calls)
        self.assertEqual({A: 0.0, B: 0.0},
                         {u: g['age'] for u, g in answer['guests'].items()})

    def test_young_samples_answer_without_a_window(self):
        dirty_rates.sample_all(self.driver, self.book, set, 1, 256)
        self.clock.now += 120
        self.driver.rates[B] = 99
        answer = dirty_rates.sample(self.driver, self.book, [A, B, C], 1,
                                    600)
        # Nothing measured again: the kept answers, with their age.
        self.assertEqual([[A, B, C]], self.driver.calls)
        self.assertEqual(6 << 20, answer['guests'][B]['dirty_rate'])
        self.assertEqual({120.0}, {g['age']
                                   for g in answer['guests'].values()})
        self.assertEqual(FIGURES, answer['figures'])

    def test_only_the_guests_without_a_young_sample_are_measured(self):
        dirty_rates.sample(self.driver, self.book, [A], 1, 0)
        self.clock.now += 700
        dirty_rates.sample(self.driver, self.book, [B], 1, 0)
        self.clock.now += 10
        answer = dirty_rates.sample(self.driver, self.book, [A, B, C], 1,
                                    600)
        # A's sample is 710 s old, C has none: both measured, B kept.
        self.assertEqual([A, C], self.driver.calls[-1])
        self.assertEqual({A: 0.0, B: 10.0, C: 0.0},
                         {u: g['age'] for u, g in answer['guests'].items()})
        # What was measured is kept for the next drain.
        found, missing, _ = self.book.young([A, C], 600)
        self.assertEqual(([], {A, C}), (missing, set(found)))

    def test_a_guest_not_here_is_left_out(self):
        gone = '00000000-0000-4000-8000-0000000000ff'
        answer = dirty_rates.sample(self.driver, self.book, [A, gone], 1,
                                    600)
        self.assertEqual([A], list(answer['guests']))

    def test_the_sampler_leaves_out_guests_migrating_out(self):
        counted = dirty_rates.sample_all(self.driver, self.book,
                                         lambda: {B}, 1, 256)
        self.assertEqual((2, [[A, C]]), (counted, self.driver.calls))

    def test_the_sampler_goes_in_batches_and_forgets_guests_gone(self):
        dirty_rates.sample_all(self.driver, self.book, set, 1, 2)
        self.assertEqual([[A, B], [C]], self.driver.calls)
        self.driver.guests = [A]
        dirty_rates.sample_all(self.driver, self.book, set, 1, 2)
        found, missing, _ = self.book.young([A, B, C], 600)
        self.assertEqual(([B, C], [A]), (missing, list(found)))

    def test_the_sampler_never_raises(self):
        driver = mock.Mock()
        driver.list_guests.side_effect = RuntimeError('libvirtd is gone')
        self.assertEqual(0, dirty_rates.sample_all(driver, self.book, set,
                                                   1, 256))
        driver.list_guests.side_effect = None
        driver.list_guests.return_value = {A: 'a'}
        driver.sample_dirty_rates.side_effect = RuntimeError('no QEMU')
        self.assertEqual(1, dirty_rates.sample_all(driver, self.book, set,
                                                   1, 256))
        found, missing, _ = self.book.young([A], 600)
        self.assertEqual(({}, [A]), (found, missing))
