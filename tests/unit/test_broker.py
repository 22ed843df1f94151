"""Tests of numamig.broker: a command's bounded look for the broker."""

import ssl

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


class CheckAcceptedTest(base.TestCase):
    """The login check: what an operator is told to change."""

    def _conf(self, **kwargs):
        values = {'ssl': False, 'ssl_ca_file': '', 'ssl_cert_file': '',
                  'ssl_key_file': ''}
        values.update(kwargs)
        return type('RabbitConf', (), values)()

    def _refused(self, exc, **conf):
        def connect(**kwargs):
            self.logins.append(kwargs)
            raise exc
        self.logins = []
        return self.assertRaises(
            exception.BrokerRefused, broker.check_accepted,
            _url('rabbit://numamig:secret@mq:5671/nm'), self._conf(**conf),
            connect=connect)

    def test_accepted_logs_in_once_with_the_tls_files(self):
        logins = []
        broker.check_accepted(
            _url('rabbit://u:p@mq:5671/nm'),
            self._conf(ssl=True, ssl_ca_file='/ca', ssl_cert_file='/c',
                       ssl_key_file='/k'),
            connect=lambda **kw: logins.append(kw))
        self.assertEqual(1, len(logins))
        self.assertEqual({'ca_certs': '/ca', 'certfile': '/c',
                          'keyfile': '/k', 'cert_reqs': ssl.CERT_REQUIRED},
                         logins[0]['ssl'])
        self.assertEqual(('mq', 5671, 'u', 'p', 'nm'), tuple(
            logins[0][k] for k in ('hostname', 'port', 'userid', 'password',
                                   'virtual_host')))

    def test_no_client_certificate_names_the_options(self):
        exc = self._refused(ssl.SSLEOFError(8, 'EOF occurred'), ssl=True,
                            ssl_ca_file='/ca')
        self.assertIn('rabbit://numamig:***@mq:5671/nm refused this client',
                      str(exc))
        self.assertIn('requires a client certificate and '
                      '[oslo_messaging_rabbit] ssl_cert_file', str(exc))
        self.assertNotIn('secret', str(exc))

    def test_a_refused_certificate_is_named(self):
        exc = self._refused(ssl.SSLError(1, 'certificate unknown'),
                            ssl=True, ssl_cert_file='/etc/c.pem')
        self.assertIn('does not accept the certificate /etc/c.pem', str(exc))

    def test_an_untrusted_broker_names_the_ca_option(self):
        error = ssl.SSLCertVerificationError(1, 'verify failed')
        error.verify_message = 'self-signed certificate'
        exc = self._refused(error, ssl=True)
        self.assertIn('not trusted (self-signed certificate); '
                      '[oslo_messaging_rabbit] ssl_ca_file', str(exc))

    def test_plain_client_of_a_tls_listener_is_told_to_set_ssl(self):
        exc = self._refused(ConnectionResetError(104, 'reset'))
        self.assertIn('set [oslo_messaging_rabbit] ssl = true', str(exc))

    def test_a_refused_login_names_the_url_parts(self):
        exc = self._refused(Exception('(0, 0): (403) ACCESS_REFUSED - Login '
                                      'was refused'))
        self.assertIn('check the user, password and vhost', str(exc))

    def test_transports_without_a_broker_are_not_checked(self):
        broker.check_accepted(_url('fake://'), self._conf(),
                              connect=self.fail)


class CheckNotRefusedTest(CheckAcceptedTest):
    """A daemon's start: only a refused login ends it."""

    def _check(self, exc):
        def connect(**kwargs):
            raise exc
        broker.check_not_refused(_url('rabbit://numamig:secret@mq:5672/nm'),
                                 self._conf(), connect=connect)

    def test_a_refused_login_ends_the_start(self):
        exc = self.assertRaises(
            exception.BrokerRefused, self._check,
            Exception('(0, 0): (403) ACCESS_REFUSED - Login was refused'))
        self.assertIn('rabbit://numamig:***@mq:5672/nm refused this client: '
                      'it refused the login', str(exc))

    def test_a_broker_down_is_waited_for_by_oslo_messaging(self):
        self._check(ConnectionRefusedError(111, 'Connection refused'))
        self._check(OSError('timed out'))
