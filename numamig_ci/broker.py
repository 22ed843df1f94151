"""Clean the broker after a harness run: its queues and exchange.

oslo.messaging's topic queues outlive their consumers; a harness run
(embedded or local) must not leave its queues behind in a broker that
other runs and deployments share.
"""

from oslo_log import log as logging

LOG = logging.getLogger(__name__)


def delete_queues(transport_url, names, servers, exchange=None):
    """Delete the RabbitMQ queues (and exchange) a run's services made.

    :param names: the run's service.RPCNames (its topics).
    :param servers: the run's service host names (per-server queues).

    Best effort: a failure is logged, not raised, since it must not hide
    the run's verdict. Nothing to do on other transports.
    """
    if not transport_url.startswith('rabbit'):
        return
    import kombu
    topics = (names.conductor_topic, names.compute_topic)
    queues = list(topics) + [f'{t}.{s}' for t in topics for s in servers]
    try:
        with kombu.Connection('amqp' + transport_url[len('rabbit'):],
                              connect_timeout=5) as conn:
            channel = conn.channel()
            for queue in queues:
                channel.queue_delete(queue)
            if exchange:
                channel.exchange_delete(exchange)
    except Exception as exc:  # noqa: BLE001 - best effort clean-up
        LOG.warning("numamig-ci: could not delete the run's RabbitMQ "
                    "queues: %s", exc)
