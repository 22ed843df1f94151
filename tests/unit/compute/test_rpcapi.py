"""The compute client: the API 1.3 calls and their fallbacks."""

from unittest import mock

import fixtures
import oslo_messaging as messaging

from numamig import objects
from numamig.compute import rpcapi
from tests import base
from tests.unit.compute import base as cbase


class ComputeAPI13Test(base.TestCase):

    def setUp(self):
        super().setUp()
        self.client = mock.Mock(name='client')
        self.useFixture(fixtures.MockPatch('numamig.rpc.get_client',
                                           return_value=self.client))
        self.api = rpcapi.ComputeAPI(mock.sentinel.transport)
        self.client.can_send_version.return_value = True
        self.sent = []
        self.answers = []
        self.client.prepare.side_effect = self._prepare
        self.inst = cbase.instance(host=cbase.SOURCE)
        self.migration = cbase.migration(self.inst)

    def _prepare(self, server, version, **options):
        cctxt = mock.Mock(name=f'cctxt-{version}')

        def call(ctxt, method, **kwargs):
            self.sent.append((version, method, sorted(kwargs)))
            answer = self.answers.pop(0) if self.answers else 'answer'
            if isinstance(answer, Exception):
                raise answer
            return answer
        cctxt.call.side_effect = call
        return cctxt

    def _check(self, source_data):
        return self.api.check_can_live_migrate_destination(
            None, self.inst, cbase.HOST, self.migration, None,
            source_data=source_data)

    def test_destination_check_with_the_source_answer_at_1_1(self):
        self._check(mock.sentinel.source_data)
        (version, method, kwargs), = self.sent
        self.assertEqual('1.1', version)
        self.assertIn('source_data', kwargs)

    def test_destination_of_release_1_is_asked_at_1_0_at_once(self):
        # Its reported service version serves 1.0: no claim parameters,
        # no source answer, one send.
        self.api.peer_versions = {cbase.HOST: 1}.get
        self._check(mock.sentinel.source_data)
        (version, _, kwargs), = self.sent
        self.assertEqual('1.0', version)
        self.assertNotIn('source_data', kwargs)
        self.assertNotIn('migration', kwargs)

    def test_without_the_source_answer_the_1_1_way(self):
        self._check(None)
        (version, _, kwargs), = self.sent
        self.assertEqual('1.1', version)
        self.assertNotIn('source_data', kwargs)

    def test_post_for_the_source_to_record_at_1_1_or_1_0(self):
        # A destination of this release, then one of release 1 (as its
        # service version says): each is sent once.
        for version in (None, 1):
            self.api.peer_versions = {self.migration.dest_host: version}.get
            self.api.post_live_migration_at_destination(
                None, self.inst, self.migration, records_by_source=True)
        self.assertEqual(
            [('1.1', True), ('1.0', False)],
            [(v, 'records_by_source' in kw) for v, _, kw in self.sent])

    def test_a_peer_s_release_is_learnt_from_its_migrate_data(self):
        # An agent has no host reports: the LiveMigrateData a release-1
        # destination built (1.0) says what it serves.
        data = mock.Mock(VERSION='1.0')
        data.get.return_value = self.migration.dest_host
        self.api._learn_from(self.migration.dest_host, data)
        self.assertEqual('1.0', self.api.cap_for(self.migration.dest_host))
        self.assertEqual(rpcapi.ComputeAPI.VERSION,
                         self.api.cap_for('another-host'))
        self.api.post_live_migration_at_destination(
            None, self.inst, self.migration, records_by_source=True)
        self.assertEqual([('1.0', False)],
                         [(v, 'records_by_source' in kw)
                          for v, _, kw in self.sent])


    def test_an_unanswered_call_names_host_method_and_option(self):
        self.answers = [messaging.MessagingTimeout('Timed out waiting for '
                                                   'a reply to message ID 1')]
        exc = self.assertRaises(
            rpcapi.AgentCallTimeout, self.api.check_can_live_migrate_source,
            None, self.inst, mock.sentinel.data, timeout=20)
        # Still oslo.messaging's timeout: callers that retry keep doing so.
        self.assertIsInstance(exc, messaging.MessagingTimeout)
        self.assertEqual(
            f"Compute host {cbase.SOURCE} did not answer "
            f"check_can_live_migrate_source within 20 s ([DEFAULT] "
            f"rpc_response_timeout_migration): its agent stopped or "
            f"restarted while it held the request, or is stuck", str(exc))

    def test_an_unanswered_resize_names_host_and_its_option(self):
        self.answers = [messaging.MessagingTimeout('Timed out waiting for '
                                                   'a reply to message ID 1')]
        exc = self.assertRaises(
            rpcapi.AgentCallTimeout, self.api.resize_virtio_mem, None,
            cbase.HOST, self.inst.uuid, {0: 128}, 30, timeout=40)
        self.assertEqual(
            f"Compute host {cbase.HOST} did not answer resize_virtio_mem "
            f"within 40 s ([virtio_mem] resize_timeout): its agent stopped "
            f"or restarted while it held the request, or is stuck", str(exc))

    def test_without_a_timeout_the_option_is_rpc_response_timeout(self):
        self.client.timeout = None
        self.client.transport.conf.rpc_response_timeout = 45
        self.answers = [messaging.MessagingTimeout()]
        exc = self.assertRaises(
            rpcapi.AgentCallTimeout, self.api.accept_emulated_migration,
            None, self.inst, self.migration, '<domain/>')
        self.assertIn(f"{cbase.HOST} did not answer accept_emulated_"
                      f"migration within 45 s ([DEFAULT] "
                      f"rpc_response_timeout)", str(exc))


class ComputeAPI14Test(ComputeAPI13Test):
    """refresh_usage (1.4), and a cap below it."""

    def test_refresh_usage_at_1_1_to_the_host(self):
        self.assertEqual('answer', self.api.refresh_usage(None, 'h-1'))
        self.assertEqual([('1.1', 'refresh_usage', [])], self.sent)
        self.assertEqual('h-1',
                         self.client.prepare.call_args.kwargs['server'])

    def test_refresh_usage_capped_below_1_1_is_unsupported(self):
        self.client.can_send_version.side_effect = lambda v: v < '1.1'
        self.assertRaises(messaging.UnsupportedVersion,
                          self.api.refresh_usage, None, 'h-1')
        self.assertEqual([], self.sent)


class _ReturnedTestCase(base.TestCase):
    """A compute client on a mocked oslo.messaging client, with a clock
    and pauses of its own (``now``, ``pauses``)."""

    def setUp(self):
        super().setUp()
        self.client = mock.Mock(name='client', timeout=60)
        self.useFixture(fixtures.MockPatch('numamig.rpc.get_client',
                                           return_value=self.client))
        self.api = rpcapi.ComputeAPI(mock.sentinel.transport)
        self.client.can_send_version.return_value = True
        self.now = [0.0]
        self.pauses = []

    def _sleep(self, seconds):
        self.pauses.append(seconds)
        self.now[0] += seconds


class StartRequestTest(_ReturnedTestCase):
    """live_migration: a cast the broker returns is cast again."""

    def setUp(self):
        super().setUp()
        self.inst = cbase.instance(host=cbase.SOURCE)
        self.migration = cbase.migration(self.inst)
        self.sent = []
        self.returned = []
        self.options = []

        def prepare(server, version, **options):
            self.options.append(options.get('transport_options'))
            cctxt = mock.Mock(name=f'cctxt-{version}')

            def cast(ctxt, method, **kwargs):
                self.sent.append(method)
                if self.returned:
                    raise self.returned.pop(0)
            cctxt.cast.side_effect = cast
            return cctxt
        self.client.prepare.side_effect = prepare

    def _start(self, **kwargs):
        return self.api.live_migration(
            None, self.inst, self.migration,
            objects.LiveMigrateData(), clock=lambda: self.now[0],
            sleep=self._sleep, **kwargs)

    def _undeliverable(self, count):
        self.returned = [messaging.MessageUndeliverable(
            Exception('NO_ROUTE'), 'numamig', 'numamig-compute.src', {})
            for _ in range(count)]

    def test_cast_with_the_mandatory_flag(self):
        self.assertIs(True, self._start())
        self.assertIs(True, self.options[0].at_least_once)
        self.assertEqual(['live_migration'], self.sent)

    def test_a_returned_cast_is_cast_again_after_growing_pauses(self):
        # The source's agent declares its queue again 1.5 s after a
        # broker restart.
        self._undeliverable(4)
        self.assertIs(True, self._start())
        self.assertEqual(5, len(self.sent))
        self.assertEqual([0.25, 0.5, 1.0, 2.0], self.pauses)

    def test_casts_again_for_a_third_of_the_response_timeout(self):
        self._undeliverable(100)
        self.assertIs(False, self._start())
        self.assertLessEqual(sum(self.pauses), 20)
        self.assertGreater(sum(self.pauses), 15)
        self.assertEqual(2.0, max(self.pauses))

    def test_the_sweep_tries_once(self):
        self._undeliverable(1)
        self.assertIs(False, self._start(wait=False))
        self.assertEqual([], self.pauses)
        self.assertEqual(1, len(self.sent))


class ReturnedCallTest(_ReturnedTestCase):
    """A call no queue takes is sent again within its one deadline."""

    def setUp(self):
        super().setUp()
        self.waits = []
        self.returned = 0

        def prepare(server, version, timeout=None, **options):
            self.waits.append(timeout)
            self.assertIs(True, options['transport_options'].at_least_once)
            cctxt = mock.Mock(name=f'cctxt-{version}')

            def call(ctxt, method, **kwargs):
                if self.returned:
                    self.returned -= 1
                    raise messaging.MessageUndeliverable(
                        Exception('NO_ROUTE'), 'numamig', server, {})
                return 'answer'
            cctxt.call.side_effect = call
            return cctxt
        self.client.prepare.side_effect = prepare

    def _call(self, timeout):
        return self.api._delivered_call(
            None, 'h-1', '1.0', 'refresh_usage', timeout, {},
            clock=lambda: self.now[0], sleep=self._sleep)

    def test_answered_once_a_queue_takes_it_with_the_time_left(self):
        self.returned = 3
        self.assertEqual('answer', self._call(10))
        self.assertEqual([0.25, 0.5, 1.0], self.pauses)
        # The first try waits the call's timeout; the next ones what is
        # left of it.
        self.assertEqual([10, 10, 10, 9], self.waits)

    def test_no_queue_before_the_deadline_is_a_timeout(self):
        self.returned = 100
        exc = self.assertRaises(messaging.MessagingTimeout, self._call, 5)
        self.assertIn('no queue of h-1 took refresh_usage', str(exc))
        self.assertLessEqual(sum(self.pauses), 5)

    def test_an_unanswered_call_is_named_by_the_caller(self):
        # Through _call the timeout becomes numamig's AgentCallTimeout.
        self.returned = 100
        self.patch(rpcapi.rpc, 'RETURNED_PAUSE_MAX_S', 0.01)
        self.patch(rpcapi.rpc, 'RETURNED_PAUSE_S', 0.01)
        self.client.timeout = 1
        exc = self.assertRaises(rpcapi.AgentCallTimeout,
                                self.api.refresh_usage, None, 'h-1')
        self.assertIn('did not answer refresh_usage', str(exc))


class PeerReleaseTest(base.TestCase):
    """Which word on a peer's release wins: its reports or its own
    LiveMigrateData."""

    def _api(self, reports_first):
        self.useFixture(fixtures.MockPatch('numamig.rpc.get_client',
                                           return_value=mock.Mock()))
        api = rpcapi.ComputeAPI(mock.sentinel.transport,
                                peer_versions={'h-1': 1}.get,
                                reports_first=reports_first)
        # h-1 sent release 2's LiveMigrateData before it was restarted
        # as release 1 (an upgrade rolled back).
        api._learn_from('h-1', objects.LiveMigrateData())
        return api

    def test_the_conductor_trusts_the_reports_it_synced(self):
        self.assertEqual('1.0', self._api(True).cap_for('h-1'))

    def test_an_agent_trusts_the_peers_own_word(self):
        api = self._api(False)
        self.assertEqual(api.VERSION, api.cap_for('h-1'))
