"""Unit tests of numamig.library_notices: one record dropped, no other."""

import logging

from amqp import abstract_channel
import fixtures

from numamig import library_notices
from tests import base


class LibraryNoticesTest(base.TestCase):

    def setUp(self):
        super().setUp()
        for name in (library_notices.AMQP_LOGGER,
                     library_notices.NO_FORK_LOGGER,
                     library_notices.LOOPING_CALL_LOGGER):
            logger = logging.getLogger(name)
            self.addCleanup(setattr, logger, 'filters', list(logger.filters))
            logger.filters = []

    def _output(self, name, install, *records):
        log = self.useFixture(fixtures.FakeLogger(name=name,
                                                  level=logging.DEBUG))
        install()
        install()
        for record in records:
            logging.getLogger(name).warning(*record)
        self.assertEqual(1, len(logging.getLogger(name).filters))
        return log.output

    def test_only_the_amqp_close_notice_is_dropped(self):
        out = self._output(
            library_notices.AMQP_LOGGER,
            library_notices.quiet_amqp_close_notice,
            (abstract_channel.IGNORED_METHOD_DURING_CHANNEL_CLOSE, (60, 30),
             1),
            ("Connection to broker lost",))
        self.assertEqual("Connection to broker lost\n", out)

    def test_only_the_no_fork_notice_is_dropped(self):
        out = self._output(
            library_notices.NO_FORK_LOGGER,
            library_notices.quiet_no_fork_notice,
            ("no_fork=True: the service runs in the main process",),
            ("another warning of the launcher",))
        self.assertEqual("another warning of the launcher\n", out)

    def test_only_the_periodic_jobs_outlasted_notice_is_dropped(self):
        # The message and arguments as oslo.service logs them.
        template = 'Function %(func_name)r run outlasted interval by ' \
                   '%(delay).2f sec'
        self.assertIn(library_notices.OUTLASTED_NOTICE,
                      _oslo_looping_call_source())
        from oslo_service.backend._common import loopingcall
        self.assertEqual(library_notices.LOOPING_CALL_LOGGER,
                         loopingcall.LOG.logger.name)
        out = self._output(
            library_notices.LOOPING_CALL_LOGGER,
            library_notices.quiet_outlasted_notice,
            (template, {'func_name': 'numamig.periodic.PeriodicJobs.'
                                     '_guarded.<locals>.run', 'delay': 0.06}),
            (template, {'func_name': 'somebody.else', 'delay': 1.5}),
            ("another warning of the looping call",))
        self.assertEqual("Function 'somebody.else' run outlasted interval "
                         "by 1.50 sec\nanother warning of the looping call\n",
                         out)


def _oslo_looping_call_source():
    """oslo.service's looping call module: the notice's template is
    still what the filter matches (fails when the library changes it)."""
    import inspect

    from oslo_service.backend._common import loopingcall
    return inspect.getsource(loopingcall)
