"""An agent's view of its peers' service versions (numamig.compute.peers)."""

from unittest import mock

import oslo_messaging as messaging

from numamig.compute import peers
from tests import base


class PeerVersionsTest(base.TestCase):

    def setUp(self):
        super().setUp()
        self.now = 0.0
        self.conductor = mock.Mock()
        self.conductor.compute_node_get_all.return_value = [
            mock.Mock(host='old', service_version=1),
            mock.Mock(host='new', service_version=2)]
        self.peers = peers.PeerVersions(self.conductor, refresh_s=60,
                                        clock=lambda: self.now)

    def test_versions_come_from_the_reports_read_once(self):
        self.assertEqual((1, 2, None), (self.peers('old'),
                                         self.peers('new'),
                                         self.peers('gone')))
        self.assertEqual(1, self.conductor.compute_node_get_all.call_count)

    def test_read_again_once_stale(self):
        self.peers('old')
        self.conductor.compute_node_get_all.return_value = [
            mock.Mock(host='old', service_version=2)]
        self.now = 59
        self.assertEqual(1, self.peers('old'))
        self.now = 61
        self.assertEqual(2, self.peers('old'))
        self.assertEqual(2, self.conductor.compute_node_get_all.call_count)

    def test_an_unanswered_read_keeps_what_is_known(self):
        self.peers('old')
        self.conductor.compute_node_get_all.side_effect = \
            messaging.MessagingTimeout('no answer')
        self.now = 61
        with self.assertLogs('numamig.compute.peers', 'WARNING') as logs:
            self.assertEqual(1, self.peers('old'))
        self.assertIn("Could not read the compute hosts' service versions",
                      logs.output[0])
        # Not asked again before the interval is up.
        self.now = 62
        self.assertEqual(1, self.peers('old'))
        self.assertEqual(2, self.conductor.compute_node_get_all.call_count)
