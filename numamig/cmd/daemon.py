"""What the two daemons' mains share: a start-up failure is one line.

A daemon that cannot start because of its configuration or its database
is not a bug: the operator needs the reason, not oslo.log's "Unhandled
error" with a traceback. Anything else still propagates (and is logged
with its traceback, as an unexpected error must be).
"""

import sys

from oslo_config import cfg
from oslo_log import log as logging

from numamig import exception

LOG = logging.getLogger(__name__)

EXIT_CANNOT_START = 2

# The scheme of numamig.rpc_inproc (setup.cfg's oslo.messaging.drivers).
IN_PROCESS_TRANSPORT = 'inproc'

# The errors a daemon meets before it serves, each saying what to fix.
_START_ERRORS = (exception.InvalidConfiguration, exception.DatabaseError,
                 exception.BrokerRefused, cfg.Error)


def check_broker(conf):
    """Refuse to start when the broker refuses this daemon's login, or
    when ``transport_url`` names the in-process transport.

    ``inproc://`` (numamig.rpc_inproc) is installed for the embedded
    deployment, whose services share one process; a daemon on it would
    wait for ever for peers that can never reach it.

    :raises BrokerRefused: see numamig.broker.check_not_refused.
    :raises InvalidConfiguration: ``inproc://``.
    """
    from numamig import broker
    from numamig import rpc
    url = rpc.transport_url(conf)
    if url.transport == IN_PROCESS_TRANSPORT:
        raise exception.InvalidConfiguration(
            option='[DEFAULT] transport_url',
            reason=f"{IN_PROCESS_TRANSPORT}:// carries messages inside one "
                   f"process only (numamig-embedded); a daemon needs the "
                   f"message broker's URL, e.g. rabbit://USER:PASSWORD@"
                   f"HOST:5672/")
    if url.transport not in ('rabbit', 'kombu'):
        return
    # Registered here as the rabbit driver registers them (equal options,
    # oslo.messaging's public list): no transport may be built before
    # the conductor's workers fork.
    from oslo_messaging import opts as messaging_opts
    group = 'oslo_messaging_rabbit'
    for name, opts in messaging_opts.list_opts():
        if name == group:
            conf.register_opts(opts, group=group)
    broker.check_not_refused(url, conf.oslo_messaging_rabbit)


def start(name, main_body):
    """Run ``main_body()``; an expected start-up error is one line.

    The line goes to stderr and, when the daemon logs to a file, to the
    log as an error without traceback.

    :returns: main_body's result, or EXIT_CANNOT_START.
    """
    try:
        return main_body()
    except _START_ERRORS as exc:
        message = f"{name} cannot start: {exception.brief(exc)}"
        if _logs_to_file():
            LOG.error("%s", message)
        print(message, file=sys.stderr, flush=True)
        return EXIT_CANNOT_START


def _logs_to_file():
    from numamig.conf import CONF
    try:
        return bool(CONF.log_file)
    except cfg.Error:  # logging options never registered or parsed
        return False
