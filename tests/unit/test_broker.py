"""Tests of numamig.broker: a command's bounded look for the broker."""

from oslo_config import cfg
import oslo_messaging as messaging

from numamig import broker
from numamig import exception
from tests import base


def _url(text):
    return messaging.TransportURL.parse(cfg.CONF, text)


class CheckReachableTest(base.TestCase):

    def setUp(self):
        super().setUp()
        self.sleeps, self.tried = [], []

    def _connect(self, refuse=()):
        def connect(address, timeout):
            self.tried.append(address)
            if refuse == '*' or address in refuse:
                raise ConnectionRefusedError(111, 'Connection refused')
            return _Socket()
        return connect

    def test_reachable_returns_at_once(self):
        broker.check_reachable(_url('rabbit://u:p@mq:5672/'), 2,
                               sleep=self.sleeps.append,
                               connect=self._connect())
        self.assertEqual([('mq', 5672)], self.tried)
        self.assertEqual([], self.sleeps)

    def test_one_host_of_several_is_enough(self):
        broker.check_reachable(_url('rabbit://u:p@mq1,u:p@mq2:5673/'), 0,
                               sleep=self.sleeps.append,
                               connect=self._connect(refuse=[('mq1', 5672)]))
        self.assertEqual([('mq1', 5672), ('mq2', 5673)], self.tried)

    def test_unreachable_ends_naming_the_broker_without_password(self):
        exc = self.assertRaises(
            exception.BrokerUnreachable, broker.check_reachable,
            _url('rabbit://guest:secret@127.0.0.1:1/'), 2,
            sleep=self.sleeps.append, connect=self._connect(refuse='*'))
        self.assertEqual([1, 2], self.sleeps)
        self.assertEqual(3, len(self.tried))
        self.assertIn('rabbit://guest:***@127.0.0.1:1/ after 3 attempts',
                      str(exc))
        self.assertNotIn('secret', str(exc))

    def test_transports_without_a_broker_are_not_checked(self):
        for text in ('fake://', 'inproc://'):
            broker.check_reachable(_url(text), 2, sleep=self.sleeps.append,
                                   connect=self._connect(refuse='*'))
        self.assertEqual([], self.tried)


class _Socket:
    def close(self):
        pass
