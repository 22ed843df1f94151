"""Library log records that alarm operators for nothing, dropped.

Each filter drops exactly one record of one library's logger and lets
every other record of that logger through. They sit on the library's own
logger (records created there), so they hold whatever handlers oslo.log
or a terminal tool configured. oslo.log cannot name these loggers (it
renames 'oslo_' loggers to 'oslo.') nor filter records, hence stdlib
logging here and nowhere else but the tools that configure a terminal.
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


class _Drop(logging.Filter):
    """Drop the records whose message matches; pass the others. ``key``
    names the filter, so that it is installed once."""

    def __init__(self, key, matches):
        super().__init__()
        self.key = key
        self.matches = matches

    def filter(self, record):
        return not self.matches(record)


def _install(logger_name, key, matches):
    logger = logging.getLogger(logger_name)
    if not any(getattr(f, 'key', None) == key for f in logger.filters):
        logger.addFilter(_Drop(key, matches))


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
