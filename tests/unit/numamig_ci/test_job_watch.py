"""JobWatch's reading of what QEMU had, without a hypervisor: the
downtimes and events a watch gathered, compared with numamig's steps."""

from numamig_ci import job_watch
from tests import base


def watch(downtimes=(), events=()):
    w = job_watch.JobWatch('test:///default', 'uuid')
    w.downtimes, w.events = list(downtimes), list(events)
    return w


class StepsAfterDefaultTest(base.TestCase):

    def test_steps_in_order_after_qemus_default(self):
        self.assertTrue(watch([300, 100, 150]).steps_after_default(
            [100, 150]))

    def test_a_step_that_is_also_the_default(self):
        # finish allows 300 ms at its fourth step.
        self.assertTrue(watch([300, 100, 150, 200, 300, 400])
                        .steps_after_default([100, 150, 200, 300, 400]))

    def test_a_step_qemu_never_had(self):
        self.assertFalse(watch([300, 100, 200]).steps_after_default(
            [100, 150, 200]))

    def test_a_downtime_numamig_did_not_record(self):
        self.assertFalse(watch([300, 100, 150, 175]).steps_after_default(
            [100, 150]))

    def test_something_else_before_the_first_step(self):
        # The timer's 50 ms before the policy's first step: not default.
        self.assertFalse(watch([300, 50, 100]).steps_after_default([100]))

    def test_no_step_at_all(self):
        self.assertFalse(watch([300]).steps_after_default([100]))


class SuspensionsTest(base.TestCase):

    def test_only_suspended_events_in_order(self):
        w = watch(events=[(job_watch.SUSPENDED, 1), (4, 0),
                          (job_watch.SUSPENDED,
                           job_watch.SUSPENDED_POSTCOPY), (5, 3)])
        self.assertEqual([1, job_watch.SUSPENDED_POSTCOPY], w.suspensions())
