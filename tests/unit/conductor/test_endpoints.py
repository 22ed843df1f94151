"""Which endpoint answers a message, in which namespace, in which objects."""

from unittest import mock

from oslo_messaging.rpc import dispatcher
import testscenarios

from numamig import context as nm_context
from numamig import objects
from numamig import releases
from numamig import rpc
from numamig.conductor import api_versions
from numamig.conductor import endpoints
from numamig.conductor import manager
from numamig.conductor import records_manager
from tests import base
from tests.unit.objects import samples

load_tests = testscenarios.load_tests_apply_scenarios
VERSION_KEY = 'numamig_object.version'


class Records:
    """An agents' endpoint answering with a Migration (1.1)."""

    target = records_manager.RecordManager.target

    def migration_get(self, ctxt, migration_uuid):
        return samples.migration()

    def migration_update_progress(self, ctxt, migration_uuid, progress):
        return 'recorded'


class Manager:
    """An operators' endpoint answering with Migrations (1.1)."""

    target = manager.ConductorManager.target

    def __init__(self):
        self.records = Records()

    def migration_get(self, ctxt, migration_uuid):
        return samples.migration()

    def migration_get_all(self, ctxt):
        return [samples.migration(), samples.migration()]

    def host_drain_plan(self, ctxt, host):
        return 'a plan'


def dispatch(endpoint_list, version, method='migration_get',
             namespace=None, **args):
    """Dispatch one message as the RPC server would; return the reply as
    it goes on the wire."""
    rpc_dispatcher = dispatcher.RPCDispatcher(
        endpoint_list, rpc.get_serializer(),
        dispatcher.DefaultRPCAccessPolicy)
    message = {'method': method, 'args': args, 'version': version}
    if namespace is not None:
        message['namespace'] = namespace
    incoming = mock.Mock(
        message=message, ctxt=nm_context.get_admin_context().to_dict(),
        client_timeout=None)
    return rpc_dispatcher.dispatch(incoming)


def served(release_version=2):
    return endpoints.served(Manager(),
                            releases.for_service_version(release_version))


class AnswerVersionTest(base.TestCase):
    """A current conductor answers each API in its objects."""

    scenarios = [
        ('1.0', {'version': '1.0', 'namespace': None, 'migration': '1.0'}),
        ('1.1', {'version': '1.1', 'namespace': None, 'migration': '1.0'}),
        ('operations 2.0', {'version': '2.0', 'namespace': 'operations',
                            'migration': objects.Migration.VERSION}),
        ('records 2.0', {'version': '2.0', 'namespace': 'records',
                         'migration': objects.Migration.VERSION}),
    ]

    def test_migration_version(self):
        on_conductor, _ = served()
        reply = dispatch(on_conductor, self.version,
                         namespace=self.namespace, migration_uuid='m')
        self.assertEqual(self.migration, reply[VERSION_KEY])
        has_result = 'elapsed_ms' in reply['numamig_object.data']
        self.assertEqual(self.migration != '1.0', has_result)


class ServedTest(base.TestCase):

    def test_release_1_api_lists_are_backported_too(self):
        on_conductor, _ = served()
        reply = dispatch(on_conductor, '1.1', method='migration_get_all')
        self.assertEqual(['1.0'] * 2, [m[VERSION_KEY] for m in reply])

    def test_release_1_api_has_only_release_1_methods(self):
        on_conductor, _ = served()
        self.assertRaises(dispatcher.NoSuchMethod, dispatch, on_conductor,
                          '1.1', method='host_drain_plan', host='h')
        self.assertEqual('a plan', dispatch(
            on_conductor, '2.0', method='host_drain_plan',
            namespace='operations', host='h'))

    def test_each_api_only_in_its_namespace(self):
        on_conductor, on_agents = served()
        # The operators' calls are not the agents' API, nor the reverse.
        self.assertRaises(dispatcher.NoSuchMethod, dispatch, on_conductor,
                          '2.0', method='host_drain_plan',
                          namespace='records', host='h')
        self.assertRaises(dispatcher.NoSuchMethod, dispatch, on_agents,
                          '2.0', method='host_drain_plan',
                          namespace='records', host='h')
        self.assertRaises(dispatcher.UnsupportedVersion, dispatch,
                          on_agents, '2.0', method='host_drain_plan',
                          namespace='operations', host='h')
        self.assertEqual('recorded', dispatch(
            on_agents, '2.0', method='migration_update_progress',
            namespace='records', migration_uuid='m', progress={}))

    def test_release_1_api_is_frozen(self):
        on_conductor, _ = served()
        self.assertRaises(dispatcher.UnsupportedVersion, dispatch,
                          on_conductor, '1.2', migration_uuid='m')

    def test_older_release_serves_only_its_api(self):
        on_conductor, on_agents = served(1)
        self.assertIsNone(on_agents)
        self.assertEqual(1, len(on_conductor))
        self.assertEqual('1.0', dispatch(on_conductor, '1.1',
                                         migration_uuid='m')[VERSION_KEY])
        for namespace in ('records', 'operations'):
            self.assertRaises(dispatcher.UnsupportedVersion, dispatch,
                              on_conductor, '2.0', namespace=namespace,
                              migration_uuid='m')

    def test_private_and_data_attributes_are_not_endpoints(self):
        release_1 = endpoints.ReleaseOneEndpoint(Manager())
        self.assertFalse(hasattr(release_1, 'records'))
        self.assertFalse(hasattr(release_1, '_manager_secret'))


class BackportedTest(base.TestCase):

    def test_nested_values(self):
        objects_ = api_versions.OBJECT_VERSIONS['1.1']
        value = {'a': [samples.migration()], 'b': 3}
        result = endpoints.backported(value, objects_)
        self.assertEqual('1.0', result['a'][0].VERSION)
        self.assertEqual(3, result['b'])
        self.assertEqual(objects.Migration.VERSION, value['a'][0].VERSION,
                         "the answer given must not change")

    def test_never_raised_above_its_version(self):
        old = endpoints.backported(samples.migration(),
                                   api_versions.OBJECT_VERSIONS['1.1'])
        again = endpoints.backported(old,
                                     api_versions.OBJECT_VERSIONS['2.0'])
        self.assertEqual('1.0', again.VERSION)
