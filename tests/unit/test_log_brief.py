"""numamig.log_brief: a peer's error logged as its message alone."""

import io
import logging

import oslo_messaging as messaging

from numamig import exception
from numamig import log_brief
from tests import base


def _remote(message):
    """An error as oslo.messaging rebuilds one raised by a peer: its
    class name ends in _Remote and its str carries the peer's
    traceback."""
    cls = type('MigrationPreCheckError_Remote',
               (exception.MigrationPreCheckError,), {})
    exc = cls(reason=message)
    cls.__str__ = lambda self: (f"Migration pre-check error: {message}\n"
                                f"Traceback (most recent call last):\n"
                                f"  File \"peer.py\", line 1\n")
    return exc


class BriefRemoteErrorsTest(base.TestCase):

    def setUp(self):
        super().setUp()
        self.out = io.StringIO()
        # Its own logger, whatever other tests did to the logging
        # configuration (levels, disabled loggers): records go straight
        # to its handler (see _log).
        self.logger = logging.Logger('test_log_brief')
        self.logger.propagate = False
        handler = logging.StreamHandler(self.out)
        self.logger.addHandler(handler)
        self.addCleanup(self.logger.removeHandler, handler)
        log_brief.install(self.logger)
        log_brief.install(self.logger)          # idempotent
        self.assertEqual(1, len(handler.filters))

    def _log(self, message, *args):
        self.logger.handle(self.logger.makeRecord(
            self.logger.name, logging.WARNING, __file__, 0, message, args,
            None))

    def test_a_peers_error_is_its_first_line(self):
        self._log("did not start: %s (%s)", _remote('not here'), 'kept')
        self.assertEqual("did not start: Migration pre-check error: not "
                         "here (kept)\n", self.out.getvalue())

    def test_mapping_arguments_too(self):
        self._log("%(why)s", {'why': _remote('gone')})
        self.assertEqual("Migration pre-check error: gone\n",
                         self.out.getvalue())

    def test_remote_error_and_local_errors(self):
        remote = messaging.RemoteError('KeyError', "'x'", 'Traceback...')
        local = ValueError("line one\nline two")
        self._log("%s | %s", remote, local)
        self.assertEqual("KeyError: 'x' | line one\nline two\n",
                         self.out.getvalue())
