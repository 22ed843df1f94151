"""The CLI's one error handling: exit codes, the line, JSON on demand."""

import io
import json
from unittest import mock

import fixtures
import oslo_messaging as messaging

from numamig import exception
from numamig.cmd import common
from tests import base


class GuardedTest(base.TestCase):

    def setUp(self):
        super().setUp()
        self.out = self.useFixture(fixtures.MonkeyPatch(
            'sys.stdout', io.StringIO())).new_value
        self.err = self.useFixture(fixtures.MonkeyPatch(
            'sys.stderr', io.StringIO())).new_value

    def _action(self, exc):
        @common.guarded
        def action(output_format='human'):
            raise exc
        return action

    def test_each_failure_has_its_exit_code(self):
        cases = [
            (exception.Invalid(reason='bad host name'), 127),
            (exception.InstanceNotFound(instance_uuid='u1'), 127),
            (ValueError('not a number'), 127),
            (exception.MigrationError(reason='no host fits'), 1),
            (exception.DatabaseError(url='sqlite://', reason='locked'), 255),
            (exception.ConductorUnreachable(
                topic='numamig-conductor', url='rabbit://h:5672/',
                timeout='5'), 255),
            (messaging.MessagingTimeout('60 s'), 255),
        ]
        for exc, code in cases:
            self.assertEqual(code, self._action(exc)())
        lines = self.err.getvalue().splitlines()
        self.assertEqual(len(cases), len(lines))
        self.assertTrue(all(line.startswith('error: ') for line in lines))
        self.assertIn('Is numamig-conductor running', lines[-2])
        # A conductor that answered the ping, then not the request.
        self.assertIn('the request may still be carried out', lines[-1])
        self.assertEqual('', self.out.getvalue())

    def test_json_error_on_stdout_with_format_json(self):
        code = self._action(exception.Invalid(reason='bad host name'))(
            output_format='json')
        self.assertEqual({'error': 'Invalid input: bad host name',
                          'exit_code': 127}, json.loads(self.out.getvalue()))
        self.assertEqual(127, code)
        self.assertEqual('error: Invalid input: bad host name\n',
                         self.err.getvalue())

    def test_a_bug_propagates(self):
        self.assertRaises(KeyError, self._action(KeyError('x')))

    def test_wants_json(self):
        self.assertTrue(common.wants_json(['host', 'list', '--format',
                                           'json']))
        self.assertTrue(common.wants_json(['host', 'list',
                                           '--format=json']))
        self.assertFalse(common.wants_json(['host', 'list', '--format']))
        self.assertFalse(common.wants_json(['json', '--format', 'human']))


class LastResortTest(base.TestCase):

    def test_unexpected_error_is_one_line_and_json_when_asked(self):
        from numamig.cmd import manage
        from numamig.db import api
        out = self.useFixture(fixtures.MonkeyPatch(
            'sys.stdout', io.StringIO())).new_value
        err = self.useFixture(fixtures.MonkeyPatch(
            'sys.stderr', io.StringIO())).new_value
        with mock.patch.object(api.Database, 'from_config',
                               side_effect=RuntimeError('boom')):
            code = manage.main(['db', 'version', '--format', 'json'])
        self.assertEqual(255, code)
        self.assertEqual('error: unexpected RuntimeError: boom\n',
                         err.getvalue())
        self.assertEqual(255, json.loads(out.getvalue())['exit_code'])


class ConfigValueTest(base.TestCase):
    """An option whose value cannot be read: one line naming it, the
    file and why, not oslo.config's repr of where it was set."""

    def test_a_bad_value_is_said_in_one_line(self):
        from numamig.cmd import manage
        path = self.useFixture(fixtures.TempDir()).path + '/bad.conf'
        with open(path, 'w') as handle:
            handle.write('[database]\nconnection = sqlite:////nonexistent/x'
                         '\ntcp_user_timeout = soon\n')
        out = self.useFixture(fixtures.MonkeyPatch(
            'sys.stdout', io.StringIO())).new_value
        err = self.useFixture(fixtures.MonkeyPatch(
            'sys.stderr', io.StringIO())).new_value
        code = manage.main(['--config-file', path, 'db', 'version',
                            '--format', 'json'])
        line = (f"invalid value of option tcp_user_timeout in {path}: "
                f"invalid literal for int() with base 10: 'soon'")
        self.assertEqual(f'error: {line}\n', err.getvalue())
        self.assertEqual({'error': line, 'exit_code': code},
                         json.loads(out.getvalue()))
        self.assertNotIn('LocationInfo', err.getvalue())
        self.assertEqual(common.EXIT_BAD_INPUT, code)

    def test_other_errors_keep_their_text(self):
        self.assertIsNone(common._config_value(RuntimeError('boom')))


class PlainTest(base.TestCase):
    """JSON output holds fields, not oslo.versionedobjects' wire format."""

    def test_an_object_is_its_set_fields(self):
        from tests.unit.db import base as db_base
        instance = db_base.make_instance()
        data = common.plain(instance.numa_topology)
        text = json.dumps(data)
        self.assertNotIn('numamig_object', text)
        cell = data['cells'][0]
        self.assertEqual({'0': 2, '1': 3}, cell['cpu_pinning'])
        self.assertEqual([0, 1], cell['pcpuset'])
        self.assertEqual(instance.uuid, data['instance_uuid'])

    def test_none_and_scalars_pass(self):
        self.assertIsNone(common.plain(None))
        self.assertEqual([1, 'a'], common.plain((1, 'a')))


class UnansweredCallTestCase(base.TestCase):
    """A call the conductor left unanswered reads the same through
    numamig.conductor.direct_rpc as through oslo.messaging."""

    def test_same_words(self):
        from numamig.conductor import direct_rpc
        self.assertEqual(
            common._rpc_problem(messaging.MessagingTimeout('x')),
            common._rpc_problem(direct_rpc.CallTimeout('y')))
        self.assertIn('answered the ping but not the request',
                      common._rpc_problem(direct_rpc.CallTimeout('y')))
