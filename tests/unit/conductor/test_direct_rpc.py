"""numamig.conductor.direct_rpc against what it stands in for: the
constants of the conductor's API, oslo.messaging's URL parsing and error
rebuilding, the Migration object's view. The wire itself is tested over
RabbitMQ in tests/functional/test_direct_rpc_wire.py."""

import datetime
import os
import sys

import fixtures
from oslo_config import cfg
import oslo_messaging as messaging
from oslo_messaging._drivers import common as messaging_common

from numamig import exception
from numamig import objects
from numamig.cmd.manage_commands import migration as migration_cmd
from numamig.conductor import api_versions
from numamig.conductor import direct_rpc
from numamig.conductor import rpcapi
from numamig.conductor import rpcclient
from numamig.conf import opts as conf_opts
from numamig.objects import service as service_obj
from tests import base

UTC = datetime.UTC


class ConstantsTestCase(base.TestCase):
    """What the module names once, equal to where it is defined."""

    def test_api(self):
        self.assertEqual(api_versions.OPERATIONS.namespace,
                         direct_rpc.OPERATIONS_NAMESPACE)
        self.assertEqual(api_versions.OPERATIONS.version,
                         direct_rpc.OPERATIONS_VERSION)
        self.assertEqual(api_versions.RELEASE_1_API.first,
                         direct_rpc.PING_VERSION)
        self.assertEqual(service_obj.SERVICE_VERSION,
                         direct_rpc.SERVICE_VERSION)
        self.assertEqual(rpcapi.TOPIC, direct_rpc.TOPIC)
        self.assertEqual(conf_opts.CONTROL_EXCHANGE,
                         direct_rpc.CONTROL_EXCHANGE)
        self.assertEqual(rpcclient.CALL_MARGIN_S, direct_rpc.CALL_MARGIN_S)

    def test_answers_are_read_in_the_versions_sent(self):
        sent = api_versions.OBJECT_VERSIONS[direct_rpc.OPERATIONS_VERSION]
        self.assertIn(sent['Migration'], direct_rpc.MIGRATION_VERSIONS)
        self.assertIn(objects.Migration.VERSION,
                      direct_rpc.MIGRATION_VERSIONS)
        self.assertIn(sent['MigrationStatusChange'],
                      direct_rpc.STATUS_CHANGE_VERSIONS)
        self.assertIn(objects.MigrationStatusChange.VERSION,
                      direct_rpc.STATUS_CHANGE_VERSIONS)

    def test_every_datetime_field_is_read_as_one(self):
        for cls in (objects.Migration, objects.MigrationStatusChange):
            times = {name for name, field in cls.fields.items()
                     if type(field).__name__ == 'DateTimeField'}
            self.assertLessEqual(times, set(direct_rpc._TIMES), cls)


class ParseUrlTestCase(base.TestCase):

    def test_served_as_oslo_messaging_reads_it(self):
        conf = cfg.ConfigOpts()
        for text in ('rabbit://guest:guest@127.0.0.1:5672/',
                     'rabbit://u%40x:p%3Aw@broker.example:5673/vh%2Fa',
                     'rabbit://u:p@broker/',
                     'rabbit://u:p@broker'):
            ours = direct_rpc.parse_url(text)
            theirs = messaging.TransportURL.parse(conf, text)
            self.assertEqual(theirs.transport, ours.transport)
            self.assertEqual(theirs.virtual_host, ours.virtual_host)
            [host] = theirs.hosts
            self.assertEqual(
                (host.hostname, host.port, host.username, host.password),
                (ours.hosts[0].hostname, ours.hosts[0].port,
                 ours.hosts[0].username, ours.hosts[0].password), text)

    def test_not_served(self):
        for text in ('rabbit://u:p@a:5672,u:p@b:5672/',   # failover
                     'rabbit://u:p@a:5672/?ssl=1',
                     'rabbit://a:5672/',                  # no credentials
                     'rabbit://u@a:5672/',
                     'rabbit://u:p@[::1]:5672/',
                     'kombu://u:p@a:5672/', 'amqp://u:p@a:5672/',
                     'fake://', 'inproc://', None):
            self.assertIsNone(direct_rpc.parse_url(text), text)


class MessagingSettingsTestCase(base.TestCase):

    def settings(self, *files):
        path = self.useFixture(fixtures.TempDir()).path
        names = []
        for number, text in enumerate(files):
            names.append(os.path.join(path, f'{number}.conf'))
            with open(names[-1], 'w') as handle:
                handle.write(text)
        conf = cfg.ConfigOpts()
        argv = []
        for name in names:
            argv += ['--config-file', name]
        conf(argv, project='numamig', default_config_files=[])
        return direct_rpc.messaging_settings(conf)

    def test_last_file_wins_and_the_default_exchange(self):
        self.assertEqual(
            ('rabbit://u:p@b/', 'numamig'),
            self.settings("[DEFAULT]\ntransport_url = rabbit://u:p@a/\n",
                          "[DEFAULT]\ntransport_url = rabbit://u:p@b/\n"))
        self.assertEqual(
            ('rabbit://u:p@b/', 'other'),
            self.settings("[DEFAULT]\ntransport_url = rabbit://u:p@b/\n"
                          "control_exchange = other\n"))

    def test_any_rabbit_option_is_left_to_oslo_messaging(self):
        for option in ('ssl = true', 'rabbit_quorum_queue = true',
                       'heartbeat_timeout_threshold = 10',
                       'rabbit_login_method = PLAIN'):
            self.assertIsNone(self.settings(
                "[DEFAULT]\ntransport_url = rabbit://u:p@a/\n"
                f"[oslo_messaging_rabbit]\n{option}\n"), option)

    def test_no_url_or_one_from_the_environment(self):
        self.assertIsNone(self.settings("[DEFAULT]\nhost = x\n"))
        # oslo.config would substitute the reference.
        self.assertIsNone(self.settings(
            "[DEFAULT]\nbroker = a\ntransport_url = rabbit://u:p@$broker/\n"))
        self.useFixture(fixtures.EnvironmentVariable(
            'OS_DEFAULT__TRANSPORT_URL', 'rabbit://u:p@c/'))
        self.assertIsNone(self.settings(
            "[DEFAULT]\ntransport_url = rabbit://u:p@a/\n"))


def _raised(error):
    try:
        raise error
    except Exception:
        return sys.exc_info()


class RemoteErrorTestCase(base.TestCase):
    """The conductor's refusal, rebuilt as numamig.rpc's client gives
    it to the command."""

    def through_oslo(self, failure):
        error = messaging_common.deserialize_remote_exception(
            failure, ['numamig.exception'])
        return exception.keep_remote_message(error)

    def test_numamig_errors_as_oslo_messaging_rebuilds_them(self):
        for error in (exception.InstanceNotFound(instance_uuid='i-1'),
                      exception.HostNotFound(host='host-z'),
                      exception.Invalid(reason='bad')):
            failure = messaging_common.serialize_remote_exception(
                _raised(error))
            ours = direct_rpc.remote_error(failure)
            theirs = self.through_oslo(failure)
            self.assertEqual(type(theirs).__name__, type(ours).__name__)
            self.assertEqual(type(theirs).__mro__[1:],
                             type(ours).__mro__[1:])
            self.assertEqual(str(theirs), str(ours))
            self.assertEqual(exception.brief(theirs), exception.brief(ours))
            self.assertEqual(theirs.remote_traceback, ours.remote_traceback)

    def test_other_errors_are_left_to_oslo_messaging(self):
        for error in (KeyError('x'), messaging.MessagingTimeout('t')):
            failure = messaging_common.serialize_remote_exception(
                _raised(error))
            self.assertRaises(direct_rpc.Unserved,
                              direct_rpc.remote_error, failure)


class MigrationRecordTestCase(base.TestCase):
    """The answer read as a record shows as the object does."""

    def migration(self):
        at = datetime.datetime(2026, 11, 28, 17, 20, 5, tzinfo=UTC)
        return objects.Migration(
            uuid='2b1e5d1e-3a4f-4e0a-9d5c-6f7a8b9c0d1e',
            instance_uuid='7d3c1a7e-0c6c-4b8e-9f64-2d2a4a1b0c11',
            source_host='host-a', dest_host='host-b',
            requested_host='host-b', status='completed', memory_total=10,
            memory_processed=10, memory_remaining=0, disk_total=0,
            disk_processed=0, disk_remaining=0, created_at=at,
            updated_at=at, admitted_at=at, error=None,
            refused_hosts={'host-c': 'no room'},
            history=[objects.MigrationStatusChange(
                status='accepted', changed_at=at, detail='created'),
                objects.MigrationStatusChange(
                status='completed', changed_at=at, detail=None)],
            elapsed_ms=1200, downtime_ms=30, emulated=True, post_copy=False,
            paused=False, priority=50, queue_position=None)

    def test_view_equal_to_the_objects(self):
        migration = self.migration()
        primitive = migration.obj_to_primitive()
        record = direct_rpc.migration_record(primitive)
        self.assertEqual(migration_cmd._view(migration),
                         migration_cmd._view(record))
        self.assertEqual(migration_cmd.progress_line(migration),
                         migration_cmd.progress_line(record))

    def test_another_object_or_version_is_not_read(self):
        primitive = self.migration().obj_to_primitive()
        for broken in ({**primitive, 'numamig_object.version': '9.0'},
                       {**primitive, 'numamig_object.name': 'Instance'},
                       {**primitive, 'numamig_object.data': 'x'}, None):
            self.assertRaises(direct_rpc.Unserved,
                              direct_rpc.migration_record, broken)
