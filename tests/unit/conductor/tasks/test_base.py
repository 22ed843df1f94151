"""TaskBase: a failed task rolls back, and says when it could not."""

from numamig import exception
from numamig.conductor.tasks import base as task_base
from tests import base


class _Task(task_base.TaskBase):

    def __init__(self, failure, rollback_failure=None):
        super().__init__(None, None)
        self.failure = failure
        self.rollback_failure = rollback_failure
        self.rolled_back = []

    def _execute(self):
        raise self.failure

    def rollback(self, exc):
        self.rolled_back.append(exc)
        if self.rollback_failure is not None:
            raise self.rollback_failure


class TaskBaseTest(base.TestCase):

    def setUp(self):
        super().setUp()
        self.refused = exception.NoValidHost(reason='nothing fits')
        self.down = exception.DatabaseError(url='db', reason='gone')

    def test_the_failure_is_raised_after_the_rollback(self):
        task = _Task(self.refused)
        self.assertRaises(exception.NoValidHost, task.execute)
        self.assertEqual([self.refused], task.rolled_back)

    def test_a_rollback_that_could_not_record_raises_the_outage(self):
        # The migration still shows 'accepted': its worker must learn
        # that nothing was recorded and keep it, or nobody drives it.
        task = _Task(self.refused, rollback_failure=self.down)
        raised = self.assertRaises(exception.DatabaseError, task.execute)
        self.assertIs(self.down, raised)
        self.assertIs(self.refused, raised.__cause__)

    def test_another_rollback_failure_is_logged_not_raised(self):
        task = _Task(self.refused, rollback_failure=RuntimeError('bug'))
        self.assertRaises(exception.NoValidHost, task.execute)

    def test_an_outage_met_twice_is_raised_once(self):
        task = _Task(self.down, rollback_failure=exception.DatabaseError(
            url='db', reason='still gone'))
        self.assertIs(self.down, self.assertRaises(exception.DatabaseError,
                                                   task.execute))
