"""Tests of numamig.exception: formatting and the documented tree."""

import datetime
import inspect
import re
import sys

import fixtures
from oslo_messaging._drivers import common as messaging_common
import testscenarios

from numamig import exception
from tests import base

load_tests = testscenarios.load_tests_apply_scenarios


def _exception_classes():
    return sorted(
        (cls for _name, cls in inspect.getmembers(exception, inspect.isclass)
         if issubclass(cls, exception.NumamigException)),
        key=lambda cls: cls.__name__)


class EveryExceptionTest(base.TestCase):
    """Each class formats with exactly the keywords its msg_fmt names."""

    scenarios = [(cls.__name__, {'cls': cls})
                 for cls in _exception_classes()]

    def test_formats_with_its_keywords(self):
        names = re.findall(r'%\((\w+)\)', self.cls.msg_fmt)
        kwargs = {name: f'<{name}>' for name in names}
        message = str(self.cls(**kwargs))
        for name in names:
            self.assertIn(f'<{name}>', message)
        self.assertNotIn('%(', message)

    def test_missing_keyword_is_fatal_in_tests(self):
        if '%(' not in self.cls.msg_fmt:
            # Nothing to miss: the message is its text as written.
            self.assertEqual(self.cls.msg_fmt.replace('%%', '%'),
                             str(self.cls()))
            return
        self.assertRaises(KeyError, self.cls)

    def test_has_an_http_like_code(self):
        self.assertIn(self.cls.code, (400, 404, 409, 500))

    def test_crosses_the_wire_whatever_its_details(self):
        # A reply that JSON cannot carry is lost on RabbitMQ and the
        # caller waits for its timeout (a timedelta did exactly that).
        names = re.findall(r'%\((\w+)\)', self.cls.msg_fmt)
        odd = (datetime.timedelta(seconds=90), {1, 2}, object())
        exc = self.cls(**{name: odd[i % len(odd)]
                          for i, name in enumerate(names)})
        try:
            raise exc
        except exception.NumamigException:
            wire = messaging_common.serialize_remote_exception(
                sys.exc_info())
        back = messaging_common.deserialize_remote_exception(
            wire, [exception.__name__])
        self.assertIsInstance(back, self.cls)
        self.assertEqual(str(exc), str(back).split('\n')[0])


class FormattingTest(base.TestCase):

    def test_explicit_message_wins(self):
        exc = exception.NoValidHost('nothing fits', reason='ignored')
        self.assertEqual('nothing fits', str(exc))
        self.assertEqual({'reason': 'ignored'}, exc.kwargs)

    def test_format_error_logged_not_raised_in_production(self):
        self.useFixture(fixtures.MonkeyPatch(
            'numamig.exception.NumamigException.FATAL_FORMAT_ERRORS', False))
        log = self.useFixture(fixtures.FakeLogger('numamig.exception'))
        exc = exception.HostNotFound(hots='typo')
        self.assertEqual(exception.HostNotFound.msg_fmt, str(exc))
        self.assertIn('Cannot format HostNotFound', log.output)

    def test_subclasses_are_caught_by_their_family(self):
        self.assertRaises(exception.Invalid, self._raise,
                          exception.ObjectValidationError(objname='X',
                                                          reason='y'))
        self.assertRaises(exception.MigrationError, self._raise,
                          exception.MigrationPreCheckError(reason='full'))
        self.assertRaises(exception.NotFound, self._raise,
                          exception.HostNotFound(host='h'))

    @staticmethod
    def _raise(exc):
        raise exc


class BriefTest(base.TestCase):
    """What an operator or a record sees of an error from a peer."""

    def _remote(self, exc):
        try:
            raise exc
        except Exception:
            wire = messaging_common.serialize_remote_exception(
                sys.exc_info())
        return messaging_common.deserialize_remote_exception(
            wire, [exception.__name__])

    def test_remote_numamig_error_is_its_message(self):
        local = exception.NoValidHost(reason='host-a: full')
        remote = self._remote(local)
        self.assertIn('Traceback', str(remote))
        self.assertEqual(str(local), exception.brief(remote))

    def test_remote_error_of_another_kind_is_type_and_value(self):
        remote = self._remote(KeyError('gone'))
        self.assertNotIn('\n', exception.brief(remote))
        self.assertIn('KeyError', exception.brief(remote))

    def test_remote_error_keeps_its_message_alone(self):
        local = exception.NoValidHost(reason='host-a: full\nhost-b: down')
        remote = exception.keep_remote_message(self._remote(local))
        self.assertEqual(str(local), str(remote))
        self.assertIsInstance(remote, exception.NoValidHost)
        self.assertTrue(remote.remote_traceback.startswith('Traceback'))
        # Idempotent: a second pass keeps the message whole.
        self.assertEqual(str(local),
                         str(exception.keep_remote_message(remote)))

    def test_remote_builtin_and_foreign_errors_keep_their_message(self):
        builtin = exception.keep_remote_message(
            self._remote(ValueError('bad value')))
        self.assertEqual(('bad value',), builtin.args)

        class Foreign(Exception):
            pass
        foreign = exception.keep_remote_message(
            self._remote(Foreign('odd')))
        self.assertNotIn('Traceback', str(foreign))
        self.assertIn('odd', str(foreign))

    def test_local_error_is_left_alone(self):
        local = RuntimeError('boom\nsecond line')
        self.assertIs(local, exception.keep_remote_message(local))
        self.assertEqual('boom\nsecond line', str(local))

    def test_local_error_is_unchanged(self):
        self.assertEqual('boom', exception.brief(RuntimeError('boom')))
        self.assertEqual('RuntimeError', exception.brief(RuntimeError()))
