"""Option listing for oslo-config-generator (the ``numamig`` namespace).

Every module of this package except the ones named in _NOT_GROUPS holds
one option group and must offer ``list_opts()``; a module without it is a
programming error and fails the generator loudly rather than leaving its
options out of the sample.
"""

import importlib
import pkgutil

# The exchange numamig's RPC uses unless transport_url names another.
CONTROL_EXCHANGE = 'numamig'
# [oslo_messaging_rabbit] rabbit_interval_max as numamig runs it: the
# longest pause between two attempts to reconnect to RabbitMQ. The
# library's 30 s made a broker restart cost up to 30 s more than the
# restart itself: a connection that failed while the node booted slept
# through its return (the pause doubles 1, 2, 4 ... s up to this). Each
# daemon tries at most every 4 s while the broker is away.
RABBIT_INTERVAL_MAX_S = 4
# [oslo_messaging_rabbit] heartbeat_rate as numamig runs it. An RPC
# server's listener and a client's reply waiter poll RabbitMQ in slices
# of heartbeat_timeout_threshold / heartbeat_rate / 2 seconds and see a
# stop only between two: the library's 3 gave 10 s slices (5 s at most
# once oslo.messaging's own cap applies), so an idle daemon took 5 to
# 11 s to stop on SIGTERM (two servers in a conductor). 30 gives 1 s
# slices with the 60 s threshold: an idle daemon stops within about a
# second, at the cost of one more wake-up a second per connection.
HEARTBEAT_RATE = 30

_NOT_GROUPS = ('checks', 'opts', 'types')


def _group_modules():
    package = importlib.import_module('numamig.conf')
    for info in sorted(pkgutil.iter_modules(package.__path__),
                       key=lambda i: i.name):
        if info.name in _NOT_GROUPS:
            continue
        module = importlib.import_module(f'numamig.conf.{info.name}')
        if not hasattr(module, 'list_opts'):
            raise AttributeError(
                f"numamig.conf.{info.name} defines no list_opts()")
        yield module


def list_opts():
    """Return ``[(group, [opts])]`` for every numamig option group."""
    merged = {}
    for module in _group_modules():
        for group, group_opts in module.list_opts().items():
            key = getattr(group, 'name', group)
            entry = merged.setdefault(key, [group, []])
            entry[1].extend(group_opts)
    return [(group, group_opts) for group, group_opts in
            sorted(merged.values(), key=lambda e: getattr(e[0], 'name',
                                                          e[0]))]


def update_library_defaults():
    """Give library options the defaults numamig runs with.

    The generator calls this (``oslo.config.opts.defaults`` entry point)
    before listing options, so the sample shows numamig's values whatever
    else ran in the process first; ``numamig.rpc`` applies the same.
    """
    # Imported here: importing oslo_messaging fixes oslo.service's
    # backend (numamig._backend), which loading the options must not do.
    import oslo_messaging as messaging
    messaging.set_transport_defaults(control_exchange=CONTROL_EXCHANGE)
    # The library offers no public setter for its driver's defaults (its
    # list_opts hands out copies); numamig.rpc reaches into the same
    # private package for its polling already.
    from oslo_config import cfg
    from oslo_messaging._drivers import impl_rabbit
    cfg.set_defaults(impl_rabbit.rabbit_opts,
                     rabbit_interval_max=RABBIT_INTERVAL_MAX_S,
                     heartbeat_rate=HEARTBEAT_RATE)


def register_all(conf):
    """Register every group of this package on ``conf``."""
    for module in _group_modules():
        module.register_opts(conf)
