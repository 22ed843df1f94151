"""Completing a migration whose guest left the source: the steps and
their order, each one asked again while unanswered."""

from unittest import mock

import fixtures
import oslo_messaging as messaging

from numamig import exception
from numamig.compute import completion
from numamig.objects import fields
from tests import base

STATUS = fields.MigrationStatus


def _agent(short=True):
    agent = mock.Mock(host='src')
    agent.conductor_api.supports_short_path.return_value = short
    agent.conductor_api.status_timeout = 1
    return agent


def _migration(status=STATUS.RUNNING):
    return mock.Mock(uuid='m-1', status=status, dest_host='dst')


class CompleteTest(base.TestCase):

    def test_short_path_destination_then_one_call_then_usage(self):
        agent, instance = _agent(), mock.Mock(uuid='i-1')
        order = mock.Mock()
        agent.compute_api.post_live_migration_at_destination = \
            order.at_destination
        agent.conductor_api.migration_complete = order.complete
        agent.tracker.drop_instance = order.drop
        done = completion.complete(agent, None, instance, _migration(),
                                   result={'elapsed_ms': 5})
        self.assertEqual(['at_destination', 'complete', 'drop'],
                         [c[0] for c in order.mock_calls])
        self.assertEqual({'records_by_source': True},
                         order.at_destination.call_args[1])
        # The first of growing shares of three status timeouts (3 s).
        self.assertEqual({'result': {'elapsed_ms': 5}, 'detail': None,
                          'timeout': 1}, order.complete.call_args[1])
        self.assertIs(order.complete.return_value, done)

    def test_usage_kept_when_asked(self):
        agent = _agent()
        completion.complete(agent, None, mock.Mock(uuid='i-1'),
                            _migration(), drop_usage=False)
        agent.tracker.drop_instance.assert_not_called()

    def test_a_lost_answer_is_asked_again(self):
        agent = _agent()
        agent.conductor_api.migration_complete.side_effect = [
            messaging.MessagingTimeout('lost'), 'recorded']
        done = completion.complete(agent, None, mock.Mock(uuid='i-1'),
                                   _migration())
        self.assertEqual('recorded', done)
        self.assertEqual(2, agent.conductor_api.migration_complete.call_count)

    def test_before_1_3_the_three_steps(self):
        agent = _agent(short=False)
        conductor = agent.conductor_api
        conductor.migration_set_status.side_effect = \
            lambda ctxt, uuid, status, **kw: _migration(status)
        completion.complete(agent, None, mock.Mock(uuid='i-1'),
                            _migration(), result={'elapsed_ms': 5})
        self.assertEqual(
            [(STATUS.POST_MIGRATING, {'elapsed_ms': 5}),
             (STATUS.COMPLETED, None)],
            [(c[0][2], c[1]['result']) for c in
             conductor.migration_set_status.call_args_list])
        self.assertEqual({'records_by_source': False},
                         agent.compute_api.post_live_migration_at_destination
                         .call_args[1])
        conductor.migration_complete.assert_not_called()

    def test_a_status_reached_meanwhile_counts_as_done(self):
        agent = _agent(short=False)
        conductor = agent.conductor_api
        conductor.migration_set_status.side_effect = \
            exception.InvalidStatusTransition(
                migration_uuid='m-1', current=STATUS.POST_MIGRATING,
                requested=STATUS.POST_MIGRATING, allowed='running')
        conductor.migration_get.return_value = _migration(
            STATUS.POST_MIGRATING)
        self.assertRaises(exception.InvalidStatusTransition,
                          completion.complete, agent, None,
                          mock.Mock(uuid='i-1'), _migration())
        # Already post-migrating: that step was done, the next one is
        # what failed (here the same refusal again).
        self.assertEqual(2, conductor.migration_set_status.call_count)


class RecordRecoveryTest(base.TestCase):

    def test_sent_and_a_failure_only_logged(self):
        agent, migration = _agent(), _migration()
        completion.record_recovery(agent, 'ctxt', migration, ['lost'])
        agent.conductor_api.migration_record_recovery.assert_called_once_with(
            'ctxt', 'm-1', ['lost'])
        agent.conductor_api.migration_record_recovery.side_effect = \
            messaging.MessagingTimeout('lost')
        log = self.useFixture(fixtures.FakeLogger())
        completion.record_recovery(agent, 'ctxt', migration, ['lost'])
        self.assertIn('recovery history not recorded', log.output)
