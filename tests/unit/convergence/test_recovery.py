"""When post-copy recovery tries, waits and gives up; its history."""

from numamig.convergence import recovery as rec
from tests import base
from tests import libvirt_settings

SETTINGS = rec.Settings(timeout_s=10, max_attempts=5, attempt_timeout_s=3)


def _walk(settings, link_back_at=None, start=100.0, stop_at=None):
    """Run the engine against a link that returns at ``link_back_at``
    (seconds after the loss; None: never), waiting exactly as told.

    :returns: (the steps taken, as (seconds after the loss, kind)),
        and the final Step.
    """
    now = start
    state = rec.lost(now)
    taken = []
    for _ in range(100):
        if stop_at is not None and now - start >= stop_at:
            state = rec.stopped(state, 'abort requested')
        step = rec.next_step(settings, state, now)
        taken.append((round(now - start, 3), step.kind))
        if step.kind in (rec.GIVE_UP, rec.DONE):
            return taken, step
        if step.kind == rec.WAIT:
            now += step.delay_s
            continue
        back = link_back_at is not None and now - start >= link_back_at
        state = rec.attempted(state, now, resumed=back)
    raise AssertionError(f"no end after 100 steps: {taken}")


class NextStepTestCase(base.TestCase):

    def test_first_attempt_waits_the_first_delay(self):
        step = rec.next_step(SETTINGS, rec.lost(50.0), 50.0)
        self.assertEqual((rec.WAIT, rec.FIRST_DELAY_S),
                         (step.kind, step.delay_s))

    def test_attempt_deadline_is_the_attempt_timeout(self):
        step = rec.next_step(SETTINGS, rec.lost(50.0), 51.0)
        self.assertEqual((rec.TRY, 1, 54.0),
                         (step.kind, step.attempt, step.deadline))

    def test_delays_double_up_to_the_cap(self):
        self.assertEqual([1, 2, 4, 8, 16, 30, 30],
                         [rec.delay_before(n) for n in range(1, 8)])

    def test_link_back_soon_resumes_at_the_next_attempt(self):
        taken, end = _walk(SETTINGS, link_back_at=2.5)
        tries = [t for t, kind in taken if kind == rec.TRY]
        # Attempts at 1 s, then 1 + 2 = 3 s: the second finds the link.
        self.assertEqual([1.0, 3.0], tries)
        self.assertEqual(rec.DONE, end.kind)

    def test_link_never_back_gives_up_at_the_timeout(self):
        taken, end = _walk(SETTINGS)
        tries = [t for t, kind in taken if kind == rec.TRY]
        # 1, 3, 7, then the last one at the deadline (10 s), not at 15.
        self.assertEqual([1.0, 3.0, 7.0, 10.0], tries)
        self.assertEqual(rec.GIVE_UP, end.kind)
        self.assertIn('did not come back within 10 s (4 attempts)',
                      end.reason)

    def test_link_back_just_before_the_deadline_is_caught(self):
        _taken, end = _walk(SETTINGS, link_back_at=9.5)
        self.assertEqual(rec.DONE, end.kind)

    def test_attempt_count_bounds_recovery(self):
        settings = libvirt_settings.recovery(timeout_s=3600, max_attempts=3)
        taken, end = _walk(settings)
        self.assertEqual(3, sum(1 for _t, k in taken if k == rec.TRY))
        self.assertEqual("3 resume attempts failed", end.reason)

    def test_disabled_gives_up_at_once(self):
        for settings in (libvirt_settings.recovery(timeout_s=0),
                         libvirt_settings.recovery(max_attempts=0)):
            taken, end = _walk(settings, link_back_at=0)
            self.assertEqual([(0, rec.GIVE_UP)], taken)
            self.assertIn('disabled', end.reason)

    def test_stop_request_gives_up_before_the_next_attempt(self):
        taken, end = _walk(SETTINGS, stop_at=2)
        self.assertEqual(1, sum(1 for _t, k in taken if k == rec.TRY))
        self.assertEqual('recovery stopped: abort requested', end.reason)

    def test_states_are_not_changed_in_place(self):
        state = rec.lost(1.0)
        after = rec.attempted(state, 2.0, resumed=False)
        self.assertEqual((0, None), (state.attempts, state.last_attempt_at))
        self.assertEqual((1, 2.0), (after.attempts, after.last_attempt_at))


class HistoryTestCase(base.TestCase):

    def test_bounded_keeps_the_first_loss_and_the_newest(self):
        history = [rec.Event(rec.LINK_LOST, at=0)] + [
            rec.Event(rec.ATTEMPT_FAILED, at=i, attempt=i, detail='x' * 500)
            for i in range(1, 100)]
        kept = rec.bounded(history)
        self.assertEqual(rec.MAX_EVENTS, len(kept))
        self.assertEqual(rec.LINK_LOST, kept[0]['event'])
        self.assertEqual(99, kept[-1]['attempt'])
        self.assertEqual(rec.MAX_DETAIL, len(kept[-1]['detail']))

    def test_describe(self):
        history = [{'event': rec.LINK_LOST}, {'event': rec.ATTEMPT_FAILED},
                   {'event': rec.ATTEMPT_FAILED}, {'event': rec.RESUMED}]
        self.assertEqual('link lost 1 time, 2 resume attempts failed, '
                         'resumed', rec.describe(history))
        self.assertEqual('link lost 1 time, gave up', rec.describe(
            [rec.Event(rec.LINK_LOST, 0), rec.Event(rec.GAVE_UP, 1)]))
