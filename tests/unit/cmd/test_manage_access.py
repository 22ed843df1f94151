"""How numamig-manage reaches the conductor (manage_commands._access)."""

from numamig import rpc
from numamig import service
from numamig.cmd.manage_commands import _access
from numamig.conf import CONF
from tests import base


class ConductorClientTestCase(base.TestCase):

    def setUp(self):
        super().setUp()
        self.addCleanup(rpc.cleanup)
        # A first transport registers oslo.messaging's options on CONF.
        rpc.get_transport(CONF, url='fake://')
        self.flags(transport_url='fake://')

    def assert_same_target_as_the_services(self):
        client = _access.conductor(timeout=7)
        names = service.RPCNames.from_conf(CONF)
        target = client.client.target
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
