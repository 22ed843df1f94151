"""Library log records that alarm operators for nothing, dropped or
told in one line.

Each filter drops (or rewrites) exactly one record of one library's
logger and lets every other record of that logger through. They sit on
the library's own logger (records created there), so they hold whatever
handlers oslo.log or a terminal tool configured. oslo.log cannot name
these loggers (it renames 'oslo_' loggers to 'oslo.') nor filter
records, hence stdlib logging here and nowhere else but the tools that
configure a terminal.
"""

import logging

# oslo.service's threading launcher warns at every start that a service
# runs in its main process: numamig chooses that for one worker.
NO_FORK_LOGGER = 'oslo_service.backend._threading.service'
NO_FORK_NOTICE = 'no_fork=True'

# py-amqp warns when RabbitMQ tells a consumer that its queue went away
# (basic.cancel) while oslo.messaging is already closing that consumer's
# channel, as every daemon and RPC server does when it stops; py-amqp
# ignores the method, as it should.
AMQP_LOGGER = 'amqp'

# oslo.service warns whenever a looping call's run takes longer than its
# interval. numamig's periodic jobs (numamig.periodic) log their own
# failures, once and summarised; a run that outlasts its interval is
# nearly always one waiting for a peer that is away, and oslo.service's
# line would repeat that at every interval.
# (oslo.log names the logger of an 'oslo_' module 'oslo.'.)
LOOPING_CALL_LOGGER = 'oslo.service.backend._common.loopingcall'
OUTLASTED_NOTICE = 'Function %(func_name)r run outlasted'
PERIODIC_JOBS = 'numamig.periodic.'

# oslo.messaging's rabbit driver logs each failed attempt to reach a
# broker node at ERROR (and a heartbeat that met a broken connection at
# WARNING) while it reconnects. A daemon keeps them in its log; a
# terminal tool (numamig-manage) has no log configured, so Python
# printed them on stderr, a dozen lines during a broker cluster's
# restart before the command's own one-line answer (it could not reach
# the broker or the conductor, exit 255), which is all an operator
# needs. Dropped in the terminal tools only.
RABBIT_DRIVER_LOGGER = 'oslo.messaging._drivers.impl_rabbit'
RECONNECT_NOTICES = (
    'Connection failed: %s (retrying in %s seconds)',
    '[%(connection_id)s] AMQP server on %(hostname)s:%(port)s is '
    'unreachable: %(err_str)s. Trying again in %(sleep_time)d seconds.',
    'Unexpected error during heartbeat thread processing, retrying...')

# oslo.messaging's AMQP listener logs a message delivered to it a second
# time with a traceback (logger.exception) and skips it. RabbitMQ
# delivers again what a consumer received but had not acknowledged when
# the broker went: with quorum queues (durable, so the message outlives
# a node's or the whole cluster's restart) every restart of the cluster
# under load does it. The listener is right to skip it (and numamig's
# methods are idempotent besides); the traceback read as a failure in
# the daemon's log. The record is kept, as one line at INFO saying what
# happened. (A stdlib logger: the module's own name, not 'oslo.'.)
AMQP_DRIVER_LOGGER = 'oslo_messaging._drivers.amqpdriver'
DUPLICATE_NOTICE = 'ignoring duplicate message %s'
DUPLICATE_LINE = ('ignoring message %s: delivered a second time (the '
                  'broker lost its acknowledgement, as a restart does) and '
                  'received already')


# oslo.messaging's RPC server logs a reply it could not send with a
# traceback (logger.exception). It happens when the broker connection
# goes between a request and its answer (a node killed, the cluster
# restarted): the caller's wait then ends by its timeout, and a request
# asked again is answered the same (every numamig method is idempotent
# under redelivery). The record is kept, as one line at WARNING with
# why.
RPC_SERVER_LOGGER = 'oslo_messaging.rpc.server'
REPLY_LOST_NOTICE = 'Can not send reply for message'
REPLY_LOST_LINE = ('could not send the reply to a request (%s): the broker '
                   "connection was lost; the caller's wait ends by its "
                   'timeout, and a request asked again is answered the same')

# oslo.messaging's rabbit consumer logs a message it could not take
# (hand to its listener and acknowledge) with a traceback and skips it.
# When the error is the broker connection going under it (a restart,
# a node lost), that is no fault of the daemon: a request it had not
# acknowledged is delivered again, and an answer or heartbeat lost this
# way is asked for again by its caller (numamig.rpc's silence monitor).
# That record is kept as one line at WARNING; any other error keeps its
# traceback.
MESSAGE_LOST_NOTICE = 'Failed to process message ... skipping it.'
MESSAGE_LOST_LINE = ('could not take a received message (%s): the broker '
                     'connection was lost; a request not acknowledged is '
                     'delivered again, and a lost answer is asked for '
                     'again by its caller')


def connection_error(exc):
    """Whether ``exc`` says a broker connection broke: a socket error, or
    py-amqp's or kombu's own connection errors (kombu's OperationalError,
    amqp's ConnectionError family). Named by module, so that a process
    that never built a RabbitMQ transport need not import either.
    numamig.rpc.link_broken asks it too."""
    if isinstance(exc, OSError):
        return True
    library = (type(exc).__module__ or '').split('.', 1)[0]
    name = type(exc).__name__
    if library == 'amqp':
        return 'Connection' in name
    return library == 'kombu' and name in ('OperationalError',
                                           'ConnectionError')


class _Drop(logging.Filter):
    """Drop the records whose message matches; pass the others. ``key``
    names the filter, so that it is installed once."""

    def __init__(self, key, matches):
        super().__init__()
        self.key = key
        self.matches = matches

    def filter(self, record):
        return not self.matches(record)


class _OneLine(logging.Filter):
    """Pass every record; the one ``matches`` names loses its traceback
    and goes at ``level``, with ``message`` (same arguments) for its
    text; with ``with_error``, ``message`` takes the error's own line
    as its one argument instead."""

    def __init__(self, key, matches, message, level=logging.INFO,
                 with_error=False):
        super().__init__()
        self.key = key
        self.matches = matches
        self.message = message
        self.level = level
        self.with_error = with_error

    def filter(self, record):
        if self.matches(record):
            if self.with_error:
                error = record.exc_info[1] if record.exc_info else None
                record.args = (f"{type(error).__name__}: {error}"
                               if error is not None else 'no error given',)
            record.msg = self.message
            record.exc_info = None
            record.exc_text = None
            record.levelno = self.level
            record.levelname = logging.getLevelName(self.level)
        return True


def _install(logger_name, key, matches, message=None, **one_line):
    logger = logging.getLogger(logger_name)
    if not any(getattr(f, 'key', None) == key for f in logger.filters):
        logger.addFilter(_Drop(key, matches) if message is None else
                         _OneLine(key, matches, message, **one_line))


def quiet_no_fork_notice():
    """Drop oslo.service's no_fork notice (idempotent)."""
    _install(NO_FORK_LOGGER, 'no-fork',
             lambda record: record.getMessage().startswith(NO_FORK_NOTICE))


def quiet_amqp_close_notice():
    """Drop py-amqp's "Received method ... during closing channel"
    warning (idempotent). py-amqp is imported only here, by a process
    that makes a transport: the CLI's start-up stays lean."""
    from amqp import abstract_channel
    template = abstract_channel.IGNORED_METHOD_DURING_CHANNEL_CLOSE
    _install(AMQP_LOGGER, 'amqp-close',
             lambda record: record.msg == template)


def quiet_outlasted_notice():
    """Drop oslo.service's "run outlasted interval" warning for
    numamig's periodic jobs, and only for them (idempotent)."""
    def matches(record):
        args = record.args if isinstance(record.args, dict) else {}
        return (isinstance(record.msg, str) and
                record.msg.startswith(OUTLASTED_NOTICE) and
                str(args.get('func_name', '')).startswith(PERIODIC_JOBS))
    _install(LOOPING_CALL_LOGGER, 'outlasted', matches)


def quiet_duplicate_notice():
    """oslo.messaging's "ignoring duplicate message" traceback as one
    line at INFO (idempotent)."""
    _install(AMQP_DRIVER_LOGGER, 'duplicate',
             lambda record: record.msg == DUPLICATE_NOTICE,
             DUPLICATE_LINE)


def quiet_reply_lost_notice():
    """oslo.messaging's "Can not send reply for message" traceback as one
    line at WARNING naming the error (idempotent)."""
    _install(RPC_SERVER_LOGGER, 'reply-lost',
             lambda record: record.msg == REPLY_LOST_NOTICE,
             REPLY_LOST_LINE, level=logging.WARNING, with_error=True)


def quiet_message_lost_notice():
    """oslo.messaging's "Failed to process message ... skipping it."
    traceback as one line at WARNING, when the broker connection broke
    under it (idempotent)."""
    def matches(record):
        error = record.exc_info[1] if record.exc_info else None
        return record.msg == MESSAGE_LOST_NOTICE and \
            error is not None and connection_error(error)
    _install(RABBIT_DRIVER_LOGGER, 'message-lost', matches,
             MESSAGE_LOST_LINE, level=logging.WARNING, with_error=True)


def quiet_reconnect_notices():
    """Drop oslo.messaging's reconnect attempts (RECONNECT_NOTICES) in a
    terminal tool, which says in one line what it could not reach
    (idempotent). Not for daemons: their logs keep them."""
    _install(RABBIT_DRIVER_LOGGER, 'reconnect',
             lambda record: record.msg in RECONNECT_NOTICES)
