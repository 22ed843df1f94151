"""Whether the message broker can be reached, asked with a bound.

oslo.messaging retries a broker it cannot reach for ever, whatever the
call's timeout: right for a daemon, which must outlive a broker restart,
wrong for an operator's command, which must end. A command asks here
first: a TCP connection to each broker host of ``transport_url``, tried
again a bounded number of times, costs well under a millisecond when
the broker is there.
"""

import socket
import time

from numamig import exception

# Transports whose hosts are brokers reached over TCP; others (fake://,
# inproc://) have nothing to reach.
_BROKER_TRANSPORTS = ('rabbit', 'amqp', 'kombu')
_DEFAULT_PORT = 5672
CONNECT_TIMEOUT_S = 5


def check_reachable(transport_url, retries, sleep=time.sleep,
                    connect=socket.create_connection):
    """Return once a broker host of ``transport_url`` accepts a connection.

    :param transport_url: an oslo.messaging TransportURL.
    :param retries: attempts after the first, 1 s, 2 s ... apart.
    :raises BrokerUnreachable: naming the URL (password masked), the
        last error and the attempts made.
    """
    if transport_url.transport not in _BROKER_TRANSPORTS or \
            not transport_url.hosts:
        return
    last = None
    for attempt in range(retries + 1):
        if attempt:
            sleep(attempt)
        for host in transport_url.hosts:
            try:
                connect((host.hostname, host.port or _DEFAULT_PORT),
                        timeout=CONNECT_TIMEOUT_S).close()
                return
            except OSError as exc:
                last = exc
    raise exception.BrokerUnreachable(url=masked(transport_url),
                                      reason=str(last),
                                      attempts=retries + 1)


def masked(transport_url):
    """The URL as an operator may see it: passwords replaced."""
    hosts = ','.join(
        f"{h.username + ':***@' if h.username else ''}{h.hostname}"
        f"{':' + str(h.port) if h.port else ''}"
        for h in transport_url.hosts)
    return f"{transport_url.transport}://{hosts}/" \
        f"{transport_url.virtual_host or ''}"
