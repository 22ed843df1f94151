"""Unit tests of numamig.library_notices: one record dropped, no other."""

import logging
import re

from amqp import abstract_channel
import fixtures

from numamig import library_notices
from tests import base


class LibraryNoticesTest(base.TestCase):

    def setUp(self):
        super().setUp()
        for name in (library_notices.AMQP_LOGGER,
                     library_notices.NO_FORK_LOGGER,
                     library_notices.LOOPING_CALL_LOGGER,
                     library_notices.AMQP_DRIVER_LOGGER,
                     library_notices.RABBIT_DRIVER_LOGGER):
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


    def test_a_duplicate_message_is_one_line_at_info(self):
        from oslo_messaging._drivers import amqpdriver
        from oslo_messaging._drivers import common as rpc_common
        # The record as oslo.messaging's listener makes it.
        self.assertEqual(library_notices.AMQP_DRIVER_LOGGER,
                         amqpdriver.LOG.name)
        self.assertIn(f'LOG.exception("{library_notices.DUPLICATE_NOTICE}"',
                      _source(amqpdriver))
        log = self.useFixture(fixtures.FakeLogger(
            name=library_notices.AMQP_DRIVER_LOGGER, level=logging.INFO,
            format='%(levelname)s %(message)s'))
        library_notices.quiet_duplicate_notice()
        library_notices.quiet_duplicate_notice()
        logger = logging.getLogger(library_notices.AMQP_DRIVER_LOGGER)
        try:
            raise rpc_common.DuplicateMessageError(msg_id='0afa672b')
        except rpc_common.DuplicateMessageError:
            logger.exception(library_notices.DUPLICATE_NOTICE, 'c34b89d2')
            logger.exception("another error of the listener")
        self.assertEqual(1, len(logger.filters))
        lines = log.output.splitlines()
        self.assertEqual(
            'INFO ignoring message c34b89d2: delivered a second time (the '
            'broker lost its acknowledgement, as a restart does) and '
            'received already', lines[0])
        # Every other record as it was, its traceback included.
        self.assertEqual('ERROR another error of the listener', lines[1])
        self.assertIn('Traceback', log.output.split(lines[1], 1)[1])


    def test_a_lost_reply_is_one_line_at_warning(self):
        from oslo_messaging.rpc import server
        # The record as oslo.messaging's RPC server makes it.
        self.assertEqual(library_notices.RPC_SERVER_LOGGER, server.LOG.name)
        self.assertIn(
            f'LOG.exception("{library_notices.REPLY_LOST_NOTICE}")',
            _source(server))
        log = self.useFixture(fixtures.FakeLogger(
            name=library_notices.RPC_SERVER_LOGGER, level=logging.INFO,
            format='%(levelname)s %(message)s'))
        library_notices.quiet_reply_lost_notice()
        library_notices.quiet_reply_lost_notice()
        logger = logging.getLogger(library_notices.RPC_SERVER_LOGGER)
        try:
            raise ConnectionResetError(104, 'Connection reset by peer')
        except ConnectionResetError:
            logger.exception(library_notices.REPLY_LOST_NOTICE)
            logger.exception("another error of the server")
        self.assertEqual(1, len(logger.filters))
        lines = log.output.splitlines()
        self.assertEqual(
            'WARNING could not send the reply to a request '
            '(ConnectionResetError: [Errno 104] Connection reset by peer): '
            "the broker connection was lost; the caller's wait ends by its "
            'timeout, and a request asked again is answered the same',
            lines[0])
        self.assertEqual('ERROR another error of the server', lines[1])
        self.assertIn('Traceback', log.output.split(lines[1], 1)[1])

    def test_a_message_lost_with_the_link_is_one_line_at_warning(self):
        from oslo_messaging._drivers import impl_rabbit
        # The record as oslo.messaging's rabbit consumer makes it.
        self.assertEqual(library_notices.RABBIT_DRIVER_LOGGER,
                         impl_rabbit.LOG.logger.name)
        self.assertIn(
            f'LOG.exception("{library_notices.MESSAGE_LOST_NOTICE}")',
            _source(impl_rabbit))
        log = self.useFixture(fixtures.FakeLogger(
            name=library_notices.RABBIT_DRIVER_LOGGER, level=logging.INFO,
            format='%(levelname)s %(message)s'))
        library_notices.quiet_message_lost_notice()
        library_notices.quiet_message_lost_notice()
        logger = logging.getLogger(library_notices.RABBIT_DRIVER_LOGGER)
        try:
            raise ConnectionResetError(104, 'Connection reset by peer')
        except ConnectionResetError:
            logger.exception(library_notices.MESSAGE_LOST_NOTICE)
        try:
            raise KeyError('failure')
        except KeyError:
            # Not the link: a fault to read, traceback and all.
            logger.exception(library_notices.MESSAGE_LOST_NOTICE)
        self.assertEqual(1, len(logger.filters))
        lines = log.output.splitlines()
        self.assertEqual(
            'WARNING could not take a received message '
            '(ConnectionResetError: [Errno 104] Connection reset by peer): '
            'the broker connection was lost; a request not acknowledged is '
            'delivered again, and a lost answer is asked for again by its '
            'caller', lines[0])
        self.assertEqual(
            f'ERROR {library_notices.MESSAGE_LOST_NOTICE}', lines[1])
        self.assertIn('Traceback', log.output.split(lines[1], 1)[1])

    def test_only_the_reconnect_notices_are_dropped(self):
        from oslo_messaging._drivers import impl_rabbit
        self.assertEqual(library_notices.RABBIT_DRIVER_LOGGER,
                         impl_rabbit.LOG.logger.name)
        # The templates as the library writes them (fails when it
        # changes one): adjacent string literals joined.
        source = re.sub(r"""['"]\s*\n\s*['"]""", '', _source(impl_rabbit))
        for template in library_notices.RECONNECT_NOTICES:
            self.assertIn(template, source)
        out = self._output(
            library_notices.RABBIT_DRIVER_LOGGER,
            library_notices.quiet_reconnect_notices,
            (library_notices.RECONNECT_NOTICES[0],
             '[Errno 111] Connection refused', 0),
            (library_notices.RECONNECT_NOTICES[1], {
                'connection_id': 'ed4b52f1', 'hostname': '127.0.0.1',
                'port': 45735, 'err_str': '[Errno 104] Connection reset',
                'sleep_time': 1}),
            (library_notices.RECONNECT_NOTICES[2],),
            ("The broker has blocked the connection",))
        self.assertEqual("The broker has blocked the connection\n", out)


def _source(module):
    import inspect
    return inspect.getsource(module)


def _oslo_looping_call_source():
    """oslo.service's looping call module: the notice's template is
    still what the filter matches (fails when the library changes it)."""
    import inspect

    from oslo_service.backend._common import loopingcall
    return inspect.getsource(loopingcall)
