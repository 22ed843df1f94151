"""``migration start`` through numamig.conductor.direct_rpc and through
oslo.messaging, side by side over the real RabbitMQ.

The same command line runs twice against one embedded deployment: once
as configured (the small py-amqp client serves it) and once with
``[DEFAULT] cli_direct_rpc = false`` (numamig.rpc, as before). Every
refusal an operator can meet prints the same bytes with the same exit
code both ways; a start answers the same migration view (uuids and
times aside); the client really served (a spy counts its requests); a
request sent twice under one migration uuid records one migration.
"""

import contextlib
import io
import json
import re
from unittest import mock

from numamig import embedded
from numamig.cmd import manage
from numamig.conductor import direct_rpc
from tests import base
from tests.fixtures import deployment
from tests.unit.cmd import test_imports

UNKNOWN_UUID = '00000000-0000-4000-8000-00000000dead'
_UUID = re.compile(r'[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-'
                   r'[0-9a-f]{12}')
_TIME = re.compile(r'\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+00:00')


class DirectAndFullTestCase(base.TestCase):

    def setUp(self):
        super().setUp()
        fixture = self.useFixture(deployment.DeploymentFixture(
            'rabbit',
            [embedded.HostDefinition('host-a', 'numa-2cell-a.xml'),
             embedded.HostDefinition('host-b', 'numa-2cell-b.xml')],
            cli_names=True))
        self.dep = fixture.deployment
        self.config = fixture.cli_config()
        self.full_config = self.config + '.full'
        with open(self.config) as given, \
                open(self.full_config, 'w') as full:
            full.write(given.read().replace(
                '[DEFAULT]\n', '[DEFAULT]\ncli_direct_rpc = false\n', 1))
        self.direct_requests = []
        real = direct_rpc.Client._publish

        def counted(client, method, *args, **kwargs):
            self.direct_requests.append(method)
            return real(client, method, *args, **kwargs)
        patcher = mock.patch.object(direct_rpc.Client, '_publish',
                                    autospec=True, side_effect=counted)
        patcher.start()
        self.addCleanup(patcher.stop)

    def cli(self, config, *argv):
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), \
                contextlib.redirect_stderr(err):
            code = manage.main(['--config-file', config, *argv])
        return code, out.getvalue(), err.getvalue()

    def both(self, *argv):
        """(code, stdout, stderr) through the direct client, then through
        oslo.messaging; asserts the direct client sent the start."""
        del self.direct_requests[:]
        direct = self.cli(self.config, *argv)
        self.assertIn('live_migrate_instance', self.direct_requests,
                      "the direct client did not serve the start")
        del self.direct_requests[:]
        full = self.cli(self.full_config, *argv)
        self.assertEqual([], self.direct_requests)
        return direct, full

    def assert_same_refusal(self, *argv, code=127):
        for fmt in ('human', 'json'):
            direct, full = self.both(*argv, '--format', fmt)
            self.assertEqual(full, direct)
            self.assertEqual(code, direct[0], direct[2])
            self.assertEqual(1, len(direct[2].strip().splitlines()))

    def create_guest(self, host='host-a'):
        code, out, err = self.cli(self.config, 'instance', 'create',
                                  '--host', host, '--vcpus', '2',
                                  '--memory', '1024', '--property',
                                  'hw:cpu_policy=dedicated', '--format',
                                  'json')
        self.assertEqual(0, code, err)
        return json.loads(out)['uuid']

    def test_unknown_instance(self):
        self.assert_same_refusal('migration', 'start', UNKNOWN_UUID)

    def test_unknown_destination(self):
        uuid = self.create_guest()
        self.assert_same_refusal('migration', 'start', uuid, '--host',
                                 'host-z')

    def test_destination_in_maintenance(self):
        uuid = self.create_guest()
        code, _, err = self.cli(self.config, 'host', 'disable', 'host-b',
                                '--reason', 'new DIMMs')
        self.assertEqual(0, code, err)
        # A "no" from the conductor (MigrationError): 1.
        self.assert_same_refusal('migration', 'start', uuid, '--host',
                                 'host-b', code=1)

    def test_unknown_policy(self):
        uuid = self.create_guest()
        self.assert_same_refusal('migration', 'start', uuid, '--policy',
                                 'goldd')

    def test_guest_already_migrating(self):
        uuid = self.create_guest()
        self.dep.conductor.executor.stop()      # the first stays queued
        code, _, err = self.cli(self.config, 'migration', 'start', uuid)
        self.assertEqual(0, code, err)
        self.assert_same_refusal('migration', 'start', uuid, '--host',
                                 'host-b')

    def test_accepted_the_same_both_ways(self):
        self.dep.conductor.executor.stop()      # each stays accepted
        for fmt in ('human', 'json'):
            runs = []
            for config in (self.config, self.full_config):
                del self.direct_requests[:]
                runs.append(self.cli(config, 'migration', 'start',
                                     self.create_guest(), '--host',
                                     'host-b', '--format', fmt))
                self.assertEqual(0, runs[-1][0], runs[-1][2])
                # Cancelled, so that the next one is first in the queue
                # too.
                started = (json.loads(runs[-1][1])['uuid'] if fmt == 'json'
                           else _UUID.findall(runs[-1][1])[0])
                gone = self.cli(self.config, 'migration', 'abort', started)
                self.assertEqual(0, gone[0], gone[2])
                self.assertEqual(config == self.config,
                                 'live_migrate_instance' in
                                 self.direct_requests)
            self.assertEqual(_masked(runs[1]), _masked(runs[0]))

    def test_wait_the_same_both_ways(self):
        first, second = self.create_guest(), self.create_guest()
        direct = self.cli(self.config, 'migration', 'start', first,
                          '--host', 'host-b', '--wait', '--format', 'json')
        self.assertIn('migration_wait', self.direct_requests)
        full = self.cli(self.full_config, 'migration', 'start', second,
                        '--host', 'host-b', '--wait', '--format', 'json')
        self.assertEqual((0, ''), (direct[0], direct[2]))
        self.assertEqual((0, ''), (full[0], full[2]))
        direct_view, full_view = (json.loads(d[1]) for d in (direct, full))
        self.assertEqual('completed', direct_view['status'])
        self.assertEqual(sorted(full_view), sorted(direct_view))
        self.assertEqual([h['status'] for h in full_view['history']],
                         [h['status'] for h in direct_view['history']])

    def test_a_request_sent_twice_records_one_migration(self):
        # The redelivery property: the conductor answers a request whose
        # migration uuid it recorded with that migration.
        self.dep.conductor.executor.stop()
        uuid = self.create_guest()
        from oslo_config import cfg

        from numamig.conf import opts
        conf = cfg.ConfigOpts()
        opts.register_all(conf)
        conf(['--config-file', self.config], project='numamig',
             default_config_files=[])
        client = direct_rpc.connect(conf, 15)
        self.addCleanup(client.close)
        client.ping(5)
        migration_uuid = '6f1b8f0e-2d55-4c84-9a43-0d8d1b7b2e10'
        once = client.live_migrate_instance(uuid, 'host-b', None, None,
                                            migration_uuid)
        twice = client.live_migrate_instance(uuid, 'host-b', None, None,
                                             migration_uuid)
        self.assertEqual(migration_uuid, once.uuid)
        self.assertEqual(once.uuid, twice.uuid)
        code, out, err = self.cli(self.config, 'migration', 'list',
                                  '--instance', uuid, '--format', 'json')
        self.assertEqual(0, code, err)
        self.assertEqual([migration_uuid],
                         [m['uuid'] for m in json.loads(out)['migrations']])

    def test_an_answer_not_read_is_asked_again_through_oslo_messaging(self):
        # The conductor recorded the request but the direct client cannot
        # read its answer (here: made so): the command asks again through
        # oslo.messaging under the same migration uuid and is answered
        # with the migration recorded, not a second one.
        self.dep.conductor.executor.stop()
        uuid = self.create_guest()

        def unread(primitive):
            raise direct_rpc.Unserved("an answer not read here")
        with mock.patch.object(direct_rpc, 'migration_record',
                               side_effect=unread):
            code, out, err = self.cli(self.config, 'migration', 'start',
                                      uuid, '--host', 'host-b',
                                      '--format', 'json')
        self.assertEqual((0, ''), (code, err))
        self.assertIn('live_migrate_instance', self.direct_requests)
        code, listed, err = self.cli(self.config, 'migration', 'list',
                                     '--instance', uuid, '--format', 'json')
        self.assertEqual([json.loads(out)['uuid']],
                         [m['uuid'] for m in json.loads(listed)['migrations']])

    def test_fresh_command_loads_no_heavy_library(self):
        # An operator's command line: a new interpreter, a start the
        # conductor records and answers (and keeps queued: nothing runs
        # on after the test).
        self.dep.conductor.executor.stop()
        uuid = self.create_guest()
        code = f"""
from numamig.cmd import manage
code = manage.main(['--config-file', {self.config!r}, 'migration',
                    'start', {uuid!r}, '--host', 'host-b'])
assert code == 0, code
assert 'numamig.conductor.direct_rpc' in sys.modules
"""
        extra = test_imports.loaded_after(code)
        self.assertEqual(set(), extra)


def _masked(run):
    code, out, err = run
    return code, _TIME.sub('TIME', _UUID.sub('UUID', out)), err
