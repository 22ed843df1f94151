"""Each command loads what it uses and nothing else.

A command line pays for every module it imports before it says
anything (issue 43: 0.57 s for a read that only reported a missing
database file, most of it alembic, the object registry with
oslo.messaging, and SQLAlchemy). Here each command's module is imported,
and each reading action run, in a fresh interpreter, and the test fails
when a heavy library the command does not need is loaded: schema
migrations only for ``db``, the object registry (and the oslo.messaging
oslo.versionedobjects brings with it) only where objects are built, a
broker driver only for commands that send.
"""

import json
import os
import subprocess
import sys
import textwrap

import fixtures
import testscenarios

from numamig.cmd.manage_commands import migration as migration_cmd
from numamig.db import api
from numamig.objects import fields
from tests import base

load_tests = testscenarios.load_tests_apply_scenarios

# The libraries a command may load only when it needs them.
HEAVY = {
    'alembic': "schema migrations: 'db' only",
    'numamig.db.schema': "schema migrations: 'db' only",
    'oslo_versionedobjects': "the object registry: where objects are built",
    'oslo_messaging': "RPC: commands that send (or build objects, since "
                      "oslo.versionedobjects imports it)",
    'kombu': "the RabbitMQ driver: commands that send",
    'sqlalchemy': "the database: actions that read or change it",
    'oslo_db.sqlalchemy': "the database: actions that read or change it",
    'lxml': "domain XML: the audits",
    'libvirt': "the hypervisor: never a command line's",
    'eventlet': "never: numamig runs on native threads",
    'prometheus_client': "the daemons' metrics endpoint: never a command "
                         "line's",
}
OBJECTS = ('oslo_versionedobjects', 'oslo_messaging')


def loaded_after(code):
    """The HEAVY modules loaded once ``code`` ran in a new interpreter
    that was prepared as numamig's command lines prepare theirs."""
    script = '\n'.join([
        'import json, sys',
        'from numamig import _backend',
        '_backend.for_command_line()',
        textwrap.dedent(code),
        f'heavy = {sorted(HEAVY)!r}',
        'print(json.dumps([n for n in heavy if sys.modules.get(n)]))'])
    done = subprocess.run([sys.executable, '-c', script],
                          capture_output=True, text=True, timeout=120,
                          cwd=os.path.dirname(os.path.dirname(
                              os.path.dirname(os.path.dirname(
                                  os.path.abspath(__file__))))))
    if done.returncode != 0:
        raise AssertionError(f"{code!r} failed: {done.stderr[-2000:]}")
    return set(json.loads(done.stdout.strip().splitlines()[-1]))


def _module(name, allowed=()):
    return (name, {'code': f'import {name}', 'allowed': set(allowed)})


class ModuleImportsTestCase(base.TestCase):
    """Importing a command's module loads none of HEAVY but what every
    action of it uses."""

    scenarios = [
        _module('numamig.cmd.manage'),
        _module('numamig.cmd.status'),
        _module('numamig.cmd.conductor'),
        _module('numamig.cmd.compute'),
        _module('numamig.cmd.manage_commands.db'),
        _module('numamig.cmd.manage_commands.host'),
        _module('numamig.cmd.manage_commands.instance'),
        _module('numamig.cmd.manage_commands.migration'),
        # Offline fits: every action builds objects with the NUMA engine.
        _module('numamig.cmd.manage_commands.numa', OBJECTS),
        # Every audit and heal reads domain XML and builds objects.
        _module('numamig.cmd.manage_commands.audit', OBJECTS + ('lxml',)),
        _module('numamig.cmd.manage_commands.heal', OBJECTS + ('lxml',)),
    ]

    def test_loads_only_what_it_needs(self):
        extra = loaded_after(self.code) - self.allowed
        self.assertEqual(set(), extra, '; '.join(
            f"{name} ({HEAVY[name]})" for name in sorted(extra)))


def _run(argv, allowed=()):
    label = ' '.join(a for a in argv if not a.startswith('{'))
    return (label, {'argv': argv, 'allowed': set(allowed)})


# What a read of the database needs: SQLAlchemy through oslo.db, and the
# objects its repository functions return.
READ = ('sqlalchemy', 'oslo_db.sqlalchemy') + OBJECTS


class ActionImportsTestCase(base.TestCase):
    """Running an action (against a synced SQLite database, no broker)
    loads only what it uses: no read loads alembic or a broker driver,
    and --help nothing."""

    scenarios = [
        _run(['--help']),
        _run(['migration', 'start', '--help']),
        # The DB-API driver and plain SELECTs (numamig.db.direct).
        _run(['host', 'list']),
        _run(['migration', 'list']),
        _run(['migration', 'list', '--status', 'queued', '--host', 'h']),
        _run(['migration', 'show', '{uuid}']),
        _run(['instance', 'list'], READ),
        _run(['db', 'version'], READ + ('alembic', 'numamig.db.schema')),
    ]

    def setUp(self):
        super().setUp()
        path = self.useFixture(fixtures.TempDir()).path
        url = f'sqlite:///{path}/numamig.sqlite'
        db = api.Database(url)
        db.sync()
        db.dispose()
        self.config = os.path.join(path, 'numamig.conf')
        with open(self.config, 'w') as handle:
            handle.write(f'[database]\nconnection = {url}\n')

    def test_loads_only_what_it_needs(self):
        # An unknown migration is a full read that ends in 127.
        argv = ['--config-file', self.config] + [
            a.replace('{uuid}', '2b1e5d1e-3a4f-4e0a-9d5c-6f7a8b9c0d1e')
            for a in self.argv]
        code = textwrap.dedent(f"""
            import contextlib, io
            from numamig.cmd import manage
            with contextlib.redirect_stdout(io.StringIO()), \\
                    contextlib.redirect_stderr(io.StringIO()):
                try:
                    code = manage.main({argv!r})
                except SystemExit as exc:
                    code = exc.code
            assert code in (0, 127, None), code
        """)
        extra = loaded_after(code) - self.allowed
        self.assertEqual(set(), extra, '; '.join(
            f"{name} ({HEAVY[name]})" for name in sorted(extra)))


class StaticListsTestCase(base.TestCase):

    def test_status_choices_are_the_enums(self):
        # migration list --status is built without the object registry.
        self.assertEqual(fields.MigrationStatus.ALL, migration_cmd.STATUSES)


class SendingImportsTestCase(base.TestCase):
    """What ``migration start`` loads to send its request and print the
    answer, less what it defers: oslo_utils.strutils (its ~300 regular
    expressions, the command's costliest import) is not run, and kombu
    does not load PyYAML (issue 43)."""

    def test_start_runs_neither_strutils_nor_yaml(self):
        code = textwrap.dedent("""
            import datetime, types
            from numamig import exception
            from numamig.cmd.manage_commands import _access
            from numamig.cmd.manage_commands import migration as cmd
            from numamig.conf import CONF
            CONF(['--config-file', CONFIG], project='numamig',
                 default_config_files=[])
            try:
                _access.conductor()   # loads the client, the driver
            except exception.BrokerUnreachable:
                pass
            # The answer, as the serializer hands it to the command.
            from numamig import context, objects, rpc
            ctxt = context.get_admin_context()
            serializer = rpc.get_serializer()
            sent = objects.Migration(
                uuid='2b1e5d1e-3a4f-4e0a-9d5c-6f7a8b9c0d1e',
                instance_uuid='7d3c1a7e-0c6c-4b8e-9f64-2d2a4a1b0c11',
                source_host='a', status='accepted', priority=0,
                created_at=datetime.datetime(2026, 1, 1,
                                             tzinfo=datetime.timezone.utc))
            answer = serializer.deserialize_entity(
                ctxt, serializer.serialize_entity(ctxt, sent))
            assert cmd._view(answer)['status'] == 'accepted'
            strutils = sys.modules.get('oslo_utils.strutils')
            assert strutils is not None and \\
                type(strutils) is not types.ModuleType, 'strutils ran'
            assert sys.modules.get('yaml') is None, 'PyYAML loaded'
        """)
        path = self.useFixture(fixtures.TempDir()).path
        config = os.path.join(path, 'numamig.conf')
        with open(config, 'w') as handle:
            handle.write("[DEFAULT]\ntransport_url = "
                         "rabbit://guest:guest@127.0.0.1:1/\n"
                         "cli_broker_retries = 0\n")
        loaded = loaded_after(f'CONFIG = {config!r}\n' + code)
        # Sending loads the client and the driver, nothing else of HEAVY.
        self.assertEqual(set(OBJECTS) | {'kombu'}, loaded)


class DirectStartImportsTestCase(base.TestCase):
    """``migration start`` served by numamig.conductor.direct_rpc loads
    neither oslo.messaging (nor kombu) nor the object registry, nor the
    database libraries: over the local RabbitMQ, on an exchange no
    conductor listens on, it logs in and pings (and ends 255 naming the
    topic); with ``cli_direct_rpc = false`` the same command loads
    oslo.messaging, so this test can fail. A start the conductor answers
    is checked the same way in tests/functional/test_cli_direct_rpc.py.
    """

    def run_start(self, direct):
        path = self.useFixture(fixtures.TempDir()).path
        config = os.path.join(path, 'numamig.conf')
        exchange = f'imports-{os.getpid()}-{id(self)}'
        self.addCleanup(_delete_exchange, exchange)
        with open(config, 'w') as handle:
            handle.write("[DEFAULT]\n"
                         "transport_url = rabbit://guest:guest@127.0.0.1:"
                         "5672/\n"
                         f"control_exchange = {exchange}\n"
                         "cli_broker_retries = 0\n"
                         "cli_conductor_timeout = 0.5\n"
                         f"cli_direct_rpc = {str(direct).lower()}\n")
        code = textwrap.dedent(f"""
            import contextlib, io
            from numamig.cmd import manage
            err = io.StringIO()
            with contextlib.redirect_stdout(io.StringIO()), \\
                    contextlib.redirect_stderr(err):
                code = manage.main(['--config-file', {config!r},
                                    'migration', 'start',
                                    '7d3c1a7e-0c6c-4b8e-9f64-2d2a4a1b0c11'])
            assert code == 255, (code, err.getvalue())
            assert 'No conductor answered' in err.getvalue(), err.getvalue()
            assert ('numamig.conductor.direct_rpc' in sys.modules) is \\
                {direct!r}
        """)
        return loaded_after(code)

    def test_direct_start_loads_no_heavy_library(self):
        extra = self.run_start(direct=True)
        self.assertEqual(set(), extra, '; '.join(
            f"{name} ({HEAVY[name]})" for name in sorted(extra)))

    def test_start_through_oslo_messaging_loads_it(self):
        self.assertIn('oslo_messaging', self.run_start(direct=False))


def _delete_exchange(name):
    """Remove the control exchange a test's command declared."""
    import amqp
    link = amqp.Connection('127.0.0.1:5672', userid='guest',
                           password='guest')
    link.connect()
    try:
        link.channel().exchange_delete(name)
    finally:
        link.close()
