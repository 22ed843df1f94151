"""Whether the message broker can be reached and accepts us, with a bound.

oslo.messaging retries a broker it cannot reach for ever, whatever the
call's timeout: right for a daemon, which must outlive a broker restart,
wrong for an operator's command, which must end. A command asks here
first: a TCP connection to each broker host of ``transport_url``, tried
again a bounded number of times, costs well under a millisecond when
the broker is there. Then ``check_accepted`` logs in once as
oslo.messaging would (TLS with the ``[oslo_messaging_rabbit]`` files,
user, password, vhost): a broker that refuses the client (no client
certificate where it requires one, an untrusted certificate, a wrong
password) is otherwise retried for ever too, and says why nowhere an
operator looks.
"""

import socket
import ssl
import time

from numamig import exception

# Transports whose hosts are brokers reached over TCP; others (fake://,
# inproc://) have nothing to reach.
_BROKER_TRANSPORTS = ('rabbit', 'amqp', 'kombu')
_DEFAULT_PORT = 5672
# How refusal() begins when the broker refused the login itself.
_REFUSED_LOGIN = 'it refused the login'
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


def check_accepted(transport_url, rabbit_conf, connect=None):
    """Return once a broker host of ``transport_url`` accepts this client.

    One AMQP login per host, with the TLS settings oslo.messaging's
    rabbit driver uses, bounded by CONNECT_TIMEOUT_S each.

    :param rabbit_conf: the ``[oslo_messaging_rabbit]`` group (ssl,
        ssl_ca_file, ssl_cert_file, ssl_key_file).
    :param connect: called with kombu.Connection keyword arguments to log
        in (tests); default: kombu.
    :raises BrokerRefused: naming the URL (password masked) and what to
        change, from the last host tried.
    """
    if transport_url.transport not in _BROKER_TRANSPORTS or \
            not transport_url.hosts:
        return
    connect = connect or _kombu_login
    tls = _tls_options(rabbit_conf)
    reason = None
    for host in transport_url.hosts:
        try:
            connect(hostname=host.hostname, port=host.port or _DEFAULT_PORT,
                    userid=host.username, password=host.password,
                    virtual_host=transport_url.virtual_host or '/',
                    ssl=tls or False, connect_timeout=CONNECT_TIMEOUT_S)
            return
        except Exception as exc:  # noqa: BLE001 - explained below
            reason = refusal(exc, rabbit_conf)
    raise exception.BrokerRefused(url=masked(transport_url), reason=reason)


def check_not_refused(transport_url, rabbit_conf, connect=None):
    """At a daemon's start: raise if the broker refuses this client's
    login (wrong user, password or vhost permissions).

    A daemon must outlive a broker that is down or restarting (it waits
    for it, as oslo.messaging does), so only a refusal ends its start: a
    broker that cannot be reached, or fails otherwise, is left to
    oslo.messaging's retries. Without this check a refused daemon died
    in its first RPC connection with kombu's traceback.

    :raises BrokerRefused: naming the URL (password masked) and what to
        change.
    """
    try:
        check_accepted(transport_url, rabbit_conf, connect=connect)
    except exception.BrokerRefused as exc:
        if _REFUSED_LOGIN in str(exc):
            raise


def _kombu_login(**kwargs):
    import kombu
    with kombu.Connection(transport='pyamqp', **kwargs) as conn:
        conn.connect()


def _tls_options(rabbit_conf):
    """kombu's ssl argument for these settings, as oslo.messaging builds
    it; None without TLS."""
    if not rabbit_conf.ssl:
        return None
    options = {'cert_reqs': ssl.CERT_NONE}
    if rabbit_conf.ssl_ca_file:
        options.update(ca_certs=rabbit_conf.ssl_ca_file,
                       cert_reqs=ssl.CERT_REQUIRED)
    if rabbit_conf.ssl_cert_file:
        options['certfile'] = rabbit_conf.ssl_cert_file
    if rabbit_conf.ssl_key_file:
        options['keyfile'] = rabbit_conf.ssl_key_file
    return options


def refusal(exc, rabbit_conf):
    """What an operator changes, given why a login failed."""
    group = '[oslo_messaging_rabbit]'
    if isinstance(exc, ssl.SSLCertVerificationError):
        return (f"its certificate is not trusted ({exc.verify_message}); "
                f"{group} ssl_ca_file must name the CA that signed it")
    if isinstance(exc, (ssl.SSLError, ConnectionResetError)) and \
            rabbit_conf.ssl:
        if not rabbit_conf.ssl_cert_file:
            return (f"it ended the TLS handshake ({_brief(exc)}): it "
                    f"requires a client certificate and {group} "
                    f"ssl_cert_file and ssl_key_file name none")
        return (f"it ended the TLS handshake ({_brief(exc)}): it does "
                f"not accept the certificate {rabbit_conf.ssl_cert_file} "
                f"(signed by a CA it does not trust, or expired?)")
    if isinstance(exc, OSError) and not isinstance(exc, ssl.SSLError) \
            and not rabbit_conf.ssl:
        return (f"it closed the connection before the AMQP login "
                f"({_brief(exc)}); if it listens for TLS only, set {group} "
                f"ssl = true with ssl_ca_file, ssl_cert_file, ssl_key_file")
    text = _brief(exc)
    if 'ACCESS_REFUSED' in text or 'NOT_ALLOWED' in text:
        return (f"{_REFUSED_LOGIN} ({text}); check the user, password "
                f"and vhost in [DEFAULT] transport_url")
    return text


def _brief(exc):
    return exception.brief(exc) or type(exc).__name__
