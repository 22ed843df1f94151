"""Convergence policies end to end on the embedded tier (fake:// and
RabbitMQ): a stalled migration escalated pass by pass.

The test driver cannot migrate; its hosts here model the pre-copy of
their emulated migrations ([libvirt] emulated_migration_bandwidth): a
1 GiB guest dirtying 150 MiB/s over 100 MiB/s never converges by
itself, so what ends it is the policy::

    host-a  models 100 MiB/s, guests dirty 150 MiB/s (busy)
    host-b  the same topology, no model
    host-c  as host-a, observe-only
"""

from numamig import embedded
from numamig import exception
from numamig.db import instances
from tests import base
from tests import libvirt_settings
from tests.fixtures import deployment
from tests.functional import test_live_migration as lm

load_tests = lm.load_tests

STRICT = ('strict: downtime=50; then=abort',)
BUSY = libvirt_settings.migration(
    emulated_bandwidth_mib=100, emulated_dirty_rate_mib=150,
    completion_timeout_s=800, policies=STRICT)
OBSERVING = libvirt_settings.migration(
    emulated_bandwidth_mib=100, emulated_dirty_rate_mib=150,
    completion_timeout_s=800, policy='nfv', observe_only=True)


def _host(name, migration=None):
    return embedded.HostDefinition(name, 'numa-2cell-a.xml',
                                   cpu_shared_set=lm.SHARED,
                                   migration=migration)


def _converged(test, migration):
    """The migration's MigrationConvergence, read as operators do (a
    satellite record, not fields of Migration)."""
    return test.api.migration_get_satellites(
        test.ctxt, migration.uuid, ['convergence'])['convergence']


class ConvergenceTest(lm.LiveMigrationTestCase):

    HOSTS = (_host('host-a', BUSY), _host('host-b'),
             _host('host-c', OBSERVING))

    def migrate_with(self, instance, dest, policy=None):
        migration = self.api.live_migrate_instance(
            self.ctxt, instance.uuid, dest, policy=policy)
        return self.dep.wait_for_migration(migration.uuid)

    def test_stalled_migration_escalated_per_pass(self):
        mover = self.create('host-a')
        migration = self.migrate_with(mover, 'host-b', policy='nfv')
        self.assertEqual('completed', migration.status, migration.error)
        self.assertEqual('nfv', _converged(self, migration).policy)
        self.assertEqual(['allow 50 ms', 'allow 100 ms', 'allow 150 ms',
                          'allow 200 ms', 'post-copy'],
                         [a.split(' of downtime')[0].split(' (')[0]
                          for a in _converged(self, migration).actions])
        self.assertIn('dirtying 157286400 B/s against 104857600 B/s',
                      _converged(self, migration).actions[1])
        self.assertTrue(migration.post_copy)
        self.assertTrue(migration.emulated)
        self.assertEqual('host-b', self.record(mover).host)

    def test_flavor_policy_finishes_whatever_it_takes(self):
        mover = self.create('host-a', specs=dict(
            lm.DEDICATED, **{'hw:live_migration_policy': 'finish'}))
        migration = self.migrate_with(mover, 'host-b')
        self.assertEqual('completed', migration.status, migration.error)
        self.assertEqual('finish', _converged(self, migration).policy)
        self.assertTrue(any(a.startswith('auto-converge')
                            for a in _converged(self, migration).actions))

    def test_timer_policy_times_out_guest_stays(self):
        mover = self.create('host-a')
        migration = self.migrate_with(mover, 'host-b')
        self.assertEqual('failed', migration.status)
        self.assertIn('completion timeout of 800 s', migration.error)
        self.assertEqual('timer', _converged(self, migration).policy)
        self.assertEqual('host-a', self.record(mover).host)
        self.assertIn(mover.uuid, self.dep.agent('host-a').driver
                      .list_guests())
        self.assert_nothing_claimed(mover)

    def test_observe_only_logs_what_the_policy_would_do(self):
        mover = self.create('host-c')
        migration = self.migrate_with(mover, 'host-b')
        # The timer acted (and timed out); nfv only watched.
        self.assertEqual('failed', migration.status)
        self.assertIn('completion timeout', migration.error)
        self.assertEqual('host-c', self.record(mover).host)

    def test_unknown_policy_refused_nothing_recorded(self):
        mover = self.create('host-a')
        exc = self.assertRaises(
            exception.UnknownMigrationPolicy,
            self.api.live_migrate_instance, self.ctxt, mover.uuid,
            'host-b', policy='goldd')
        self.assertIn('Unknown live-migration policy goldd (requested '
                      'for the migration); known policies: finish, '
                      'never_pause, nfv, timer', str(exc))
        self.assertEqual([], self.api.migration_get_all(self.ctxt))

    def test_unknown_flavor_policy_refused(self):
        specs = dict(lm.DEDICATED, **{'hw:live_migration_policy': 'nope'})
        # A new guest naming it is refused (issue 44: it could never
        # migrate), nothing recorded.
        exc = self.assertRaises(exception.UnknownMigrationPolicy,
                                self.create, 'host-a', specs=specs)
        self.assertIn('flavor key hw:live_migration_policy', str(exc))
        self.assertEqual([], self.api.instance_get_all(self.ctxt))
        # A guest recorded with it before (an earlier release): its
        # migration is refused, unless the request names a policy, which
        # comes first.
        mover = self.create('host-a')
        instances.update(self.dep.db, mover.uuid, {'extra_specs': specs})
        exc = self.assertRaises(exception.UnknownMigrationPolicy,
                                self.api.live_migrate_instance, self.ctxt,
                                mover.uuid, 'host-b')
        self.assertIn('flavor key hw:live_migration_policy', str(exc))
        migration = self.dep.wait_for_migration(
            self.api.live_migrate_instance(self.ctxt, mover.uuid, 'host-b',
                                           policy='nfv').uuid)
        self.assertEqual(('completed', 'nfv'), (
            migration.status, _converged(self, migration).policy),
            migration.error)


class PredictionTest(lm.LiveMigrationTestCase):
    """The pre-flight prediction: in dry runs, recorded next to the
    outcome, and refusing what will not converge."""

    HOSTS = ConvergenceTest.HOSTS
    MODE = 'refuse'

    def setUp(self):
        base.TestCase.setUp(self)
        self.flags(group='conductor', convergence_prediction=self.MODE)
        self.flags(group='libvirt', live_migration_policies=list(STRICT))
        self.dep = self.useFixture(deployment.DeploymentFixture(
            self.transport_kind, self.hosts())).deployment
        self.api, self.ctxt = self.dep.api, self.dep.context

    def test_dry_run_predicts_from_the_sampled_rate(self):
        busy = self.create('host-a')
        answer = self.api.live_migration_dry_run(self.ctxt, busy.uuid,
                                                 'host-b')
        prediction = answer['prediction']
        self.assertEqual(('will-not-converge', 'timer', 'emulated',
                          150 * 2 ** 20),
                         (prediction['prediction'], prediction['policy'],
                          prediction['dirty_rate_method'],
                          prediction['sampled_dirty_rate']))
        self.assertEqual([], self.api.migration_get_all(self.ctxt))

    def test_dry_run_unknown_where_nothing_measures(self):
        idle = self.create('host-b')
        prediction = self.api.live_migration_dry_run(
            self.ctxt, idle.uuid, 'host-a')['prediction']
        self.assertEqual('unknown', prediction['prediction'])
        # The test driver refuses every calculation mode, by name.
        self.assertIn('page-sampling: this function is not supported',
                      prediction['reason'])
        self.assertIsNone(prediction['sampled_dirty_rate'])

    def predicted(self, migration):
        """The migration's MigrationPrediction, read as operators do
        (a satellite record, not a field of Migration)."""
        return self.api.migration_get_satellites(
            self.ctxt, migration.uuid, ['prediction'])['prediction']

    def test_refused_before_anything_is_claimed(self):
        busy = self.create('host-a')
        migration = self.migrate(busy, 'host-b')
        self.assertEqual('error', migration.status)
        self.assertIn('predicted not to converge under policy timer',
                      migration.error)
        predicted = self.predicted(migration)
        self.assertEqual(('will-not-converge', 150 * 2 ** 20),
                         (predicted.prediction,
                          predicted.sampled_dirty_rate))
        self.assertEqual('host-a', self.record(busy).host)
        self.assert_nothing_claimed(busy)

    def test_prediction_recorded_next_to_the_outcome(self):
        busy = self.create('host-a', specs=dict(
            lm.DEDICATED, **{'hw:live_migration_policy': 'nfv'}))
        migration = self.migrate(busy, 'host-b')
        self.assertEqual('completed', migration.status, migration.error)
        # Predicted: post-copy needed; outcome: post-copy.
        self.assertEqual(('needs-post-copy', True),
                         (self.predicted(migration).prediction,
                          migration.post_copy))


class ChoosePolicyTest(PredictionTest):
    """convergence_prediction = choose: a migration predicted not to
    converge under its policy runs under the first fallback that ends
    it."""

    MODE = 'choose'

    # Choose never refuses what it predicts will not converge: it runs
    # it under a fallback instead (test_fallback_policy_chosen_and_run).
    test_refused_before_anything_is_claimed = None

    def test_fallback_policy_chosen_and_run(self):
        busy = self.create('host-a')
        migration = self.migrate(busy, 'host-b')
        self.assertEqual('completed', migration.status, migration.error)
        # timer will not converge; never_pause (the first fallback) ends
        # it by auto-converge or post-copy.
        self.assertEqual('never_pause', _converged(self, migration).policy)
        self.assertEqual('needs-auto-converge',
                         self.predicted(migration).prediction)
        self.assertTrue(any(a.startswith('auto-converge')
                            for a in _converged(self, migration).actions))

    def test_requested_policy_is_never_replaced(self):
        busy = self.create('host-a')
        self._requested_policy_stays(busy)

    def test_requested_policy_of_a_guest_with_an_unknown_one(self):
        # Issue 44: a guest recorded by an earlier release with a policy
        # this conductor does not know migrates under a requested one;
        # choosing a fallback must not trip on its flavor's.
        busy = self.create('host-a')
        instances.update(self.dep.db, busy.uuid, {'extra_specs': dict(
            lm.DEDICATED, **{'hw:live_migration_policy': 'gold'})})
        self._requested_policy_stays(busy)

    def _requested_policy_stays(self, busy):
        migration = self.api.live_migrate_instance(
            self.ctxt, busy.uuid, 'host-b', policy='strict')
        migration = self.dep.wait_for_migration(migration.uuid)
        self.assertEqual('error', migration.status)
        self.assertIn('predicted not to converge under policy strict',
                      migration.error)
        self.assertEqual('strict', _converged(self, migration).policy)
        self.assertEqual('host-a', self.record(busy).host)
