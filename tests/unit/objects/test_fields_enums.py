"""The migration status groups follow the transition table."""

from numamig.objects import fields
from numamig.objects import migration
from tests import base

STATUS = fields.MigrationStatus
GROUPS = ('FINAL', 'IN_PROGRESS', 'UNSUCCESSFUL', 'NOT_STARTED', 'STARTED',
          'ABORTABLE', 'COPIED', 'HALTED', 'ACTIVE', 'SETTLED')


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

    def test_abortable_copied_and_halted_split_the_started(self):
        self.assertEqual(set(STATUS.STARTED),
                         set(STATUS.ABORTABLE) | set(STATUS.HALTED) |
                         (set(STATUS.COPIED) - {STATUS.COMPLETED}))
        for one, other in (('ABORTABLE', 'HALTED'), ('COPIED', 'HALTED'),
                           ('ABORTABLE', 'COPIED')):
            self.assertFalse(set(getattr(STATUS, one)) &
                             set(getattr(STATUS, other)), (one, other))
        for status in STATUS.COPIED:
            self.assertNotIn(STATUS.CANCELLED, STATUS.TRANSITIONS[status])

    def test_groups_keep_the_walking_order(self):
        for name in GROUPS:
            group = getattr(STATUS, name)
            self.assertEqual(tuple(s for s in STATUS.ALL if s in group),
                             group, name)

    def test_objects_use_the_same_table(self):
        self.assertIs(STATUS.TRANSITIONS, migration.ALLOWED_TRANSITIONS)


class HaltedStatusTest(base.TestCase):
    """postcopy-paused: a guest split between the hosts after its
    post-copy recovery gave up. Each group that decides what happens to
    its claims, its admission slot and its waits must place it right; a
    change of the table that moves it fails here."""

    def test_it_is_halted_in_progress_and_started(self):
        self.assertEqual((STATUS.POSTCOPY_PAUSED,), STATUS.HALTED)
        self.assertIn(STATUS.POSTCOPY_PAUSED, STATUS.IN_PROGRESS)
        self.assertIn(STATUS.POSTCOPY_PAUSED, STATUS.STARTED)

    def test_its_claims_are_kept(self):
        # Only an unsuccessful end releases claims (conductor records).
        self.assertNotIn(STATUS.POSTCOPY_PAUSED, STATUS.FINAL)
        self.assertNotIn(STATUS.POSTCOPY_PAUSED, STATUS.UNSUCCESSFUL)

    def test_it_can_be_neither_aborted_nor_rolled_back(self):
        self.assertNotIn(STATUS.POSTCOPY_PAUSED, STATUS.ABORTABLE)
        self.assertFalse({STATUS.FAILED, STATUS.CANCELLED} &
                         STATUS.TRANSITIONS[STATUS.POSTCOPY_PAUSED])

    def test_its_copy_is_not_over(self):
        self.assertNotIn(STATUS.POSTCOPY_PAUSED, STATUS.COPIED)

    def test_it_counts_toward_no_admission_limit(self):
        self.assertNotIn(STATUS.POSTCOPY_PAUSED, STATUS.ACTIVE)
        self.assertEqual(set(STATUS.IN_PROGRESS) - set(STATUS.HALTED),
                         set(STATUS.ACTIVE))

    def test_waits_settle_on_it(self):
        self.assertEqual(set(STATUS.FINAL) | {STATUS.POSTCOPY_PAUSED},
                         set(STATUS.SETTLED))

    def test_reached_from_running_and_left_by_resume_or_reconciliation(self):
        reaches = {s for s, nxt in STATUS.TRANSITIONS.items()
                   if STATUS.POSTCOPY_PAUSED in nxt}
        self.assertEqual({STATUS.RUNNING}, reaches)
        self.assertEqual({STATUS.RUNNING, STATUS.COMPLETED, STATUS.ERROR},
                         STATUS.TRANSITIONS[STATUS.POSTCOPY_PAUSED])

    def test_an_older_peer_reads_running(self):
        self.assertEqual(STATUS.RUNNING,
                         STATUS().older_value(STATUS.POSTCOPY_PAUSED))
