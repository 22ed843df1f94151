"""numamig-manage migration resume and abort of a postcopy-paused
migration, over the real wire (RabbitMQ and in-process).

An embedded deployment's hosts run the libvirt test driver, which has
no post-copy; the migration is put in postcopy-paused in its records, as
a source whose recovery gave up leaves it. Every answer an operator can
meet crosses the transport: one line (JSON with --format json), the
documented exit code, the records as the help says. An agent of an
older release is a server serving compute API 1.0 (release 1) on the
same broker.
"""

import contextlib
import io
import json

import oslo_messaging as messaging
import testscenarios

from numamig import embedded
from numamig import exception
from numamig import objects
from numamig.cmd import manage
from numamig.compute import rpcapi as compute_rpcapi
from numamig.db import instances
from numamig.db import migrations
from tests import base
from tests.fixtures import deployment
from tests.fixtures import rpc as rpc_fixture
from tests.functional import test_manage_refusals

load_tests = testscenarios.load_tests_apply_scenarios

UNKNOWN_UUID = '00000000-0000-4000-8000-00000000beef'


class PausedMigrationCLITest(base.TestCase):

    scenarios = rpc_fixture.TRANSPORT_SCENARIOS

    def setUp(self):
        super().setUp()
        fixture = self.useFixture(deployment.DeploymentFixture(
            self.transport_kind,
            [embedded.HostDefinition('host-a', 'numa-2cell-a.xml'),
             embedded.HostDefinition('host-b', 'numa-2cell-b.xml')],
            cli_names=True))
        self.dep = fixture.deployment
        self.config = fixture.cli_config()
        self.db = self.dep.db
        self.guest = self._create_guest()
        self.migration = self._paused(self.guest)

    def cli(self, *argv):
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), \
                contextlib.redirect_stderr(err):
            code = manage.main(['--config-file', self.config, *argv])
        return code, out.getvalue(), err.getvalue()

    def _create_guest(self):
        code, out, err = self.cli('instance', 'create', '--host', 'host-a',
                                  '--vcpus', '2', '--memory', '1024',
                                  '--property', 'hw:cpu_policy=dedicated',
                                  '--format', 'json')
        self.assertEqual(0, code, err)
        return json.loads(out)['uuid']

    def _paused(self, guest, statuses=('queued', 'running',
                                       'postcopy-paused')):
        """A migration of ``guest`` to host-b in its records, as a
        source whose post-copy recovery gave up leaves it."""
        inst = instances.get(self.db, guest).instance
        migration = migrations.create(self.db, objects.Migration(
            uuid=_uuid(),
            instance_uuid=guest, source_host='host-a', dest_host='host-b',
            status='accepted'))
        instances.set_migration_context(self.db, guest,
                                        objects.MigrationContext(
            instance_uuid=guest, migration_uuid=migration.uuid,
            source_host='host-a', dest_host='host-b',
            old_numa_topology=inst.numa_topology,
            new_numa_topology=inst.numa_topology))
        for status in statuses:
            migrations.set_status(self.db, migration.uuid, status)
        return migration.uuid

    def _status(self):
        return migrations.get(self.db, self.migration).status

    def _claim(self):
        context = instances.get(self.db, self.guest).instance\
            .migration_context
        return context and context.migration_uuid

    def assert_refused(self, argv, *words, changes_nothing=True):
        """127, one line naming ``words``; with --format json the same
        as JSON on stdout."""
        before = test_manage_refusals.row_counts(self.dep.db_url)
        for json_format in (False, True):
            args = argv + (('--format', 'json') if json_format else ())
            code, out, err = self.cli(*args)
            self.assertEqual(127, code, f"{args}: {err}")
            self.assertEqual(1, len(err.strip().splitlines()), err)
            self.assertNotIn('Traceback', out + err)
            for word in words:
                self.assertIn(word, err)
            if json_format:
                answer = json.loads(out)
                self.assertEqual(127, answer['exit_code'])
                self.assertEqual(err.strip()[len('error: '):],
                                 answer['error'])
        if changes_nothing:
            self.assertEqual(before,
                             test_manage_refusals.row_counts(
                                 self.dep.db_url))

    def test_abort_is_refused_saying_why(self):
        self.assert_refused(('migration', 'abort', self.migration),
                            'is postcopy-paused', 'neither half is the guest',
                            'numamig-manage migration resume')
        self.assertEqual('postcopy-paused', self._status())
        self.assertEqual(self.migration, self._claim())

    def test_resume_refused_by_a_source_without_a_paused_guest(self):
        # The test driver's guest is not paused in a broken post-copy:
        # the source refuses, and the migration is postcopy-paused again.
        self.assert_refused(('migration', 'resume', self.migration),
                            'is not paused in a broken post-copy on source '
                            'host host-a', changes_nothing=False)
        self.assertEqual('postcopy-paused', self._status())
        self.assertEqual(self.migration, self._claim())
        history = migrations.get(self.db, self.migration).history
        self.assertIn('resume refused', history[-1].detail)

    def test_resume_of_a_migration_that_is_not_paused(self):
        other = self._paused(self._create_guest(),
                             statuses=('queued', 'running'))
        self.assert_refused(('migration', 'resume', other),
                            'only a postcopy-paused migration can be resumed')

    def test_resume_of_an_unknown_or_malformed_migration(self):
        self.assert_refused(('migration', 'resume', UNKNOWN_UUID),
                            UNKNOWN_UUID)
        self.assert_refused(('migration', 'resume', 'not-a-uuid'),
                            'not-a-uuid')

    def test_resume_being_resumed_answers_already(self):
        migrations.set_status(self.db, self.migration, 'running')
        code, out, err = self.cli('migration', 'resume', self.migration)
        self.assertEqual(0, code, err)
        self.assertIn('already being resumed on host-a', out)
        code, out, err = self.cli('migration', 'resume', self.migration,
                                  '--format', 'json')
        self.assertEqual(0, code, err)
        self.assertEqual('already-resuming', json.loads(out)['resume'])

    def test_resume_after_completion_answers_already_completed(self):
        migrations.set_status(self.db, self.migration, 'running')
        migrations.set_status(self.db, self.migration, 'completed')
        code, out, err = self.cli('migration', 'resume', self.migration,
                                  '--format', 'json')
        self.assertEqual(0, code, err)
        answer = json.loads(out)
        self.assertEqual(('already-completed', 'completed'),
                         (answer['resume'], answer['status']))

    def test_listed_by_its_status(self):
        code, out, err = self.cli('migration', 'list', '--status',
                                  'postcopy-paused', '--format', 'json')
        self.assertEqual(0, code, err)
        self.assertEqual([self.migration],
                         [m['uuid'] for m in json.loads(out)['migrations']])


def _uuid():
    import uuid
    return str(uuid.uuid4())


class _OlderAgent:
    """A compute agent of release 1 (compute API 1.0): no resume."""

    target = messaging.Target(version='1.0')

    def live_migration_abort(self, ctxt, instance, migration):
        return False


class OlderAgentRefusesResumeTest(base.TestCase):
    """An agent of release 1 (as its reported service version says) is
    not sent a resume: one line naming it at once, not a hang."""

    scenarios = rpc_fixture.TRANSPORT_SCENARIOS

    def setUp(self):
        super().setUp()
        self.rpc = self.useFixture(rpc_fixture.RPCFixture(
            self.transport_kind))
        topic = self.rpc.topic('compute')
        self.rpc.start_server([_OlderAgent()], topic, server='old-src')
        self.api = compute_rpcapi.ComputeAPI(
            self.rpc.transport, topic=topic, exchange=self.rpc.exchange,
            peer_versions={'old-src': 1}.get)
        inst = objects.Instance(uuid=_uuid(), name='g', project_id='p',
                                host='old-src', vcpus=1, memory_mb=512)
        self.inst = inst
        self.migration = objects.Migration(
            uuid=_uuid(), instance_uuid=inst.uuid, source_host='old-src',
            dest_host='old-src-2', status='running')

    def test_refused_naming_the_release(self):
        exc = self.assertRaises(
            exception.MigrationNotResumable, self.api.resume_postcopy,
            self.rpc.context, self.inst, self.migration, timeout=10)
        self.assertIn('the agent on old-src is of a release older than '
                      'compute API 1.1', str(exc))

    def test_a_capped_client_refuses_before_sending(self):
        capped = compute_rpcapi.ComputeAPI(
            self.rpc.transport, version_cap='1.0',
            topic=self.rpc.topic('compute'), exchange=self.rpc.exchange)
        self.assertRaisesMessage(
            exception.MigrationNotResumable,
            "[upgrade_levels] compute caps this client below it",
            capped.resume_postcopy, self.rpc.context, self.inst,
            self.migration)
