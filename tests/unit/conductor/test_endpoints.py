"""Which endpoint answers a message, and in which object versions."""

from unittest import mock

from oslo_messaging.rpc import dispatcher
import testscenarios

from numamig import context as nm_context
from numamig import objects
from numamig import rpc
from numamig.conductor import endpoints
from numamig.conductor import manager
from numamig.conductor import rpcapi
from tests import base
from tests.unit.objects import samples

load_tests = testscenarios.load_tests_apply_scenarios
VERSION_KEY = 'numamig_object.version'


class Manager:
    """A conductor manager answering with a Migration (1.1)."""

    target = manager.ConductorManager.target

    def migration_get(self, ctxt, migration_uuid):
        return samples.migration()

    def migration_get_all(self, ctxt):
        return [samples.migration(), samples.migration()]


def dispatch(endpoint_list, version, method='migration_get', **args):
    """Dispatch one message as the RPC server would; return the reply as
    it goes on the wire."""
    rpc_dispatcher = dispatcher.RPCDispatcher(
        endpoint_list, rpc.get_serializer(),
        dispatcher.DefaultRPCAccessPolicy)
    incoming = mock.Mock(
        message={'method': method, 'args': args, 'version': version},
        ctxt=nm_context.get_admin_context().to_dict(), client_timeout=None)
    return rpc_dispatcher.dispatch(incoming)


class AnswerVersionTest(base.TestCase):
    """A current conductor answers each API version in its objects."""

    scenarios = [('1.0', {'version': '1.0', 'migration': '1.0'}),
                 ('1.1', {'version': '1.1', 'migration': '1.0'}),
                 ('1.2', {'version': '1.2',
                          'migration': objects.Migration.VERSION})]

    def test_migration_version(self):
        reply = dispatch(endpoints.for_api_version(Manager()), self.version,
                         migration_uuid='m')
        self.assertEqual(self.migration, reply[VERSION_KEY])
        has_result = 'elapsed_ms' in reply['numamig_object.data']
        self.assertEqual(self.migration != '1.0', has_result)

    def test_lists_are_backported_too(self):
        reply = dispatch(endpoints.for_api_version(Manager()), self.version,
                         method='migration_get_all')
        self.assertEqual([self.migration] * 2,
                         [m[VERSION_KEY] for m in reply])


class OlderReleaseTest(base.TestCase):

    def test_serves_only_its_api(self):
        served = endpoints.for_api_version(Manager(), '1.1')
        self.assertEqual(1, len(served))
        self.assertEqual('1.0', dispatch(served, '1.1', migration_uuid='m')[
            VERSION_KEY])
        self.assertRaises(dispatcher.UnsupportedVersion, dispatch, served,
                          '1.2', migration_uuid='m')

    def test_current_release_serves_older_versions_first(self):
        current = Manager()
        served = endpoints.for_api_version(current)
        # 1.1: release 1's API, answering in its objects; then the
        # current one.
        self.assertEqual(['1.1', rpcapi.ConductorAPI.VERSION],
                         [e.target.version for e in served])
        self.assertIs(current, served[-1])

    def test_private_and_data_attributes_are_not_endpoints(self):
        manager = Manager()
        manager.db = object()
        older = endpoints.OlderAPIEndpoint(manager, '1.1')
        self.assertFalse(hasattr(older, 'db'))
        self.assertFalse(hasattr(older, '_manager_secret'))


class BackportedTest(base.TestCase):

    def test_nested_values(self):
        objects_ = rpcapi.OBJECT_VERSIONS['1.1']
        value = {'a': [samples.migration()], 'b': 3}
        result = endpoints.backported(value, objects_)
        self.assertEqual('1.0', result['a'][0].VERSION)
        self.assertEqual(3, result['b'])
        self.assertEqual(objects.Migration.VERSION, value['a'][0].VERSION,
                         "the answer given must not change")

    def test_never_raised_above_its_version(self):
        old = endpoints.backported(samples.migration(),
                                   rpcapi.OBJECT_VERSIONS['1.1'])
        again = endpoints.backported(old, rpcapi.OBJECT_VERSIONS['1.2'])
        self.assertEqual('1.0', again.VERSION)
