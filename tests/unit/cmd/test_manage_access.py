"""How numamig-manage reaches the conductor (manage_commands._access)."""

import time
from unittest import mock

import fixtures

from numamig import exception
from numamig import rpc
from numamig import service
from numamig.cmd.manage_commands import _access
from numamig.conductor import api_versions
from numamig.conf import CONF
from numamig.objects import service as service_obj
from tests import base


class ConductorClientTestCase(base.TestCase):

    def setUp(self):
        super().setUp()
        self.addCleanup(rpc.cleanup)
        # A first transport registers oslo.messaging's options on CONF.
        rpc.get_transport(CONF, url='fake://')
        self.flags(transport_url='fake://')

    def assert_same_target_as_the_services(self):
        # No conductor listens here: the ping is answered for it.
        self.useFixture(fixtures.MockPatch(
            'numamig.conductor.rpcapi.ConductorAPI.ping', autospec=True,
            side_effect=lambda api, ctxt, timeout: api.link.learn(
                service_obj.SERVICE_VERSION)))
        client = _access.conductor(timeout=7)
        names = service.RPCNames.from_conf(CONF)
        route = client.link.route(api_versions.OPERATIONS)
        target = route.client.target
        # The operators' API, in its namespace.
        self.assertEqual('operations', target.namespace)
        self.assertEqual((names.conductor_topic, names.exchange),
                         (target.topic, target.exchange))
        self.assertEqual(7, client.timeout)
        return target

    def test_default_exchange(self):
        target = self.assert_same_target_as_the_services()
        self.assertIsNone(target.exchange)

    def test_deployment_on_its_own_exchange(self):
        self.flags(control_exchange='numamig-ci-abc123')
        target = self.assert_same_target_as_the_services()
        self.assertEqual('numamig-ci-abc123', target.exchange)


class NoConductorTestCase(ConductorClientTestCase):
    """No conductor consumes the topic: one line at once, nothing sent."""

    def test_fails_within_the_ping_timeout_naming_the_conductor(self):
        self.flags(cli_conductor_timeout=0.5)
        sent = []
        real = rpc._PreparedCall.call

        def call(prepared, ctxt, method, **kwargs):
            sent.append(method)
            return real(prepared, ctxt, method, **kwargs)
        with mock.patch.object(rpc._PreparedCall, 'call', call):
            began = time.monotonic()
            exc = self.assertRaises(exception.ConductorUnreachable,
                                    _access.conductor)
            took = time.monotonic() - began
        # Before: the action itself was sent and waited 60 s.
        self.assertLess(took, 3)
        self.assertEqual(['ping'], sent)
        self.assertIn('No conductor answered on topic numamig-conductor',
                      str(exc))
        self.assertIn('within 0.5 s ([DEFAULT] cli_conductor_timeout); '
                      'nothing was asked of it', str(exc))
        self.assertNotIn('\n', str(exc))


class DirectReaderTestCase(base.TestCase):
    """numamig-manage's direct reads connect with the [database] libpq
    bounds, as the conductor's engine does: a read of a silent primary
    fails within them instead of the kernel's minutes."""

    def test_the_options_reach_the_driver(self):
        url = 'postgresql+psycopg2://numamig@db1,db2/numamig'
        self.flags(connection=url, tcp_user_timeout=4000,
                   keepalives_idle=7, group='database')
        with mock.patch('numamig.db.direct.connect',
                        return_value=None) as connect:
            with _access.direct_reader() as reader:
                self.assertIsNone(reader)
        connect.assert_called_once_with(url, {
            'keepalives': 1, 'keepalives_idle': 7,
            'keepalives_interval': 5, 'keepalives_count': 3,
            'tcp_user_timeout': 4000})
