"""The migration status groups follow the transition table."""

from numamig.objects import fields
from numamig.objects import migration
from tests import base

STATUS = fields.MigrationStatus
GROUPS = ('FINAL', 'IN_PROGRESS', 'UNSUCCESSFUL', 'NOT_STARTED', 'STARTED',
          'ABORTABLE', 'COPIED')


class MigrationStatusGroupsTest(base.TestCase):

    def test_every_status_has_a_row_in_the_table(self):
        self.assertEqual(set(STATUS.ALL), set(STATUS.TRANSITIONS))
        for targets in STATUS.TRANSITIONS.values():
            self.assertLessEqual(targets, set(STATUS.ALL))

    def test_every_status_is_final_or_in_progress_never_both(self):
        for status in STATUS.ALL:
            self.assertNotEqual(status in STATUS.FINAL,
                                status in STATUS.IN_PROGRESS, status)

    def test_final_statuses_have_no_way_out(self):
        for status in STATUS.ALL:
            self.assertEqual(status in STATUS.FINAL,
                             not STATUS.TRANSITIONS[status], status)

    def test_in_progress_is_not_started_or_started(self):
        for status in STATUS.IN_PROGRESS:
            self.assertNotEqual(status in STATUS.NOT_STARTED,
                                status in STATUS.STARTED, status)

    def test_unsuccessful_is_every_end_but_completed(self):
        self.assertEqual(set(STATUS.FINAL) - {STATUS.COMPLETED},
                         set(STATUS.UNSUCCESSFUL))

    def test_nothing_started_before_the_source_took_over(self):
        # Only what has not started can be queued again or cancelled
        # without the source: both unstarted statuses lead to cancelled.
        for status in STATUS.NOT_STARTED:
            self.assertIn(STATUS.CANCELLED, STATUS.TRANSITIONS[status])
        self.assertNotIn(STATUS.ACCEPTED,
                         set().union(*(STATUS.TRANSITIONS[s]
                                       for s in STATUS.STARTED)))

    def test_abortable_and_copied_split_the_started(self):
        self.assertEqual(set(STATUS.STARTED),
                         set(STATUS.ABORTABLE) |
                         (set(STATUS.COPIED) - {STATUS.COMPLETED}))
        for status in STATUS.COPIED:
            self.assertNotIn(STATUS.CANCELLED, STATUS.TRANSITIONS[status])

    def test_groups_keep_the_walking_order(self):
        for name in GROUPS:
            group = getattr(STATUS, name)
            self.assertEqual(tuple(s for s in STATUS.ALL if s in group),
                             group, name)

    def test_objects_use_the_same_table(self):
        self.assertIs(STATUS.TRANSITIONS, migration.ALLOWED_TRANSITIONS)
