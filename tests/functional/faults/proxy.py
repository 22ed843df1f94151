"""A TCP proxy the test controls: the network between daemons and a server.

The fault suite puts one between the daemons and PostgreSQL and one
between the daemons and RabbitMQ, so that an outage can be made without
touching the servers other people use on this machine:

* ``cut(seconds)``: every open connection is reset (both sides see it
  die, as when a server restarts or a link drops) and, for ``seconds``,
  every new connection is reset as soon as it is accepted;
* ``cut(seconds, unanswered_s)``: first, for ``unanswered_s``, every
  byte the server sends is dropped while the clients' bytes still reach
  it, then the cut: a transaction committed in that window never has
  its answer (a server that dies, or a link that fails, with a COMMIT
  under way);
* ``freeze(seconds)``: connections stay open and new ones are accepted,
  but no byte crosses in either direction until the freeze ends; then
  whatever was sent meanwhile is delivered (a broker or database that
  hangs, or a partitioned link that heals).

Plain threads, two per connection (one per direction), bound to
127.0.0.1 (or the address given: the root namespace's end of a
conductor namespace's link, netns.py) on a port the kernel picks;
``close`` stops everything.
"""

import socket
import threading
import time

from tests.fixtures import tcp_proxy

# Bytes read from one side at a time.
CHUNK = 65536


class Proxy:
    """Forward <listen>:<port> to ``upstream`` (host, port).

    :ivar port: the port the daemons connect to, once started.
    """

    def __init__(self, upstream, name, listen='127.0.0.1'):
        self.upstream = upstream
        self.name = name
        self.listen = listen
        self._listener = socket.create_server((listen, 0))
        self.port = self._listener.getsockname()[1]
        self._lock = threading.Lock()
        self._links = set()
        self._cut_until = 0.0
        # Set while bytes may flow; cleared for a freeze.
        self._flowing = threading.Event()
        self._flowing.set()
        self._closed = False
        # Set while the server's bytes are dropped (cut's unanswered_s).
        self._unanswered = False
        self.connections_seen = 0
        threading.Thread(target=self._accept_loop, daemon=True,
                         name=f'proxy-{name}').start()

    def _accept_loop(self):
        while not self._closed:
            try:
                client, _addr = self._listener.accept()
            except OSError:
                return
            self.connections_seen += 1
            if self._is_cut():
                tcp_proxy.reset(client)
                continue
            threading.Thread(target=self._open_link, args=(client,),
                             daemon=True, name=f'proxy-{self.name}-link'
                             ).start()

    def _is_cut(self):
        return time.monotonic() < self._cut_until or self._closed

    def _open_link(self, client):
        # A connection accepted during a freeze reaches the server only
        # once the freeze ends, as a SYN held by a hung network would.
        self._flowing.wait()
        try:
            server = socket.create_connection(self.upstream, timeout=10)
            server.settimeout(None)
        except OSError:
            tcp_proxy.reset(client)
            return
        link = (client, server)
        with self._lock:
            if self._is_cut():
                tcp_proxy.reset(client)
                tcp_proxy.reset(server)
                return
            self._links.add(link)
        for src, dst in ((client, server), (server, client)):
            threading.Thread(target=self._pump, args=(link, src, dst),
                             daemon=True,
                             name=f'proxy-{self.name}-pump').start()

    def _pump(self, link, src, dst):
        try:
            while True:
                data = src.recv(CHUNK)
                if not data:
                    break
                # Held here during a freeze; delivered after it.
                self._flowing.wait()
                if link not in self._links:
                    break
                if self._unanswered and src is link[1]:
                    continue
                dst.sendall(data)
        except OSError:
            pass
        self._drop(link)

    def _drop(self, link, reset=False):
        with self._lock:
            if link not in self._links:
                return
            self._links.discard(link)
        for sock in link:
            if reset:
                tcp_proxy.reset(sock)
            else:
                _close(sock)

    def cut(self, seconds, unanswered_s=0):
        """Reset every connection now and refuse new ones for ``seconds``.

        :param unanswered_s: before the cut, drop what the server sends
            for this long (this call waits for it).
        Returns once the cut is made; the outage ends by itself.
        """
        if unanswered_s:
            self._unanswered = True
            time.sleep(unanswered_s)
        self._cut_until = time.monotonic() + seconds
        self._unanswered = False
        with self._lock:
            links = list(self._links)
        for link in links:
            self._drop(link, reset=True)

    def reopen(self):
        """End a cut now (one made with more seconds than needed)."""
        self._cut_until = 0.0

    def freeze(self, seconds):
        """Pass no byte for ``seconds`` (returns at once)."""
        self._flowing.clear()
        timer = threading.Timer(seconds, self._flowing.set)
        timer.daemon = True
        timer.start()

    def upstream_ports(self):
        """The local ports of the proxy's connections to the server: what
        the server sees as its clients' ports (PostgreSQL's
        pg_stat_activity.client_port)."""
        with self._lock:
            links = list(self._links)
        ports = set()
        for _client, server in links:
            try:
                ports.add(server.getsockname()[1])
            except OSError:
                continue        # closed meanwhile
        return ports

    def open_links(self):
        with self._lock:
            return len(self._links)

    def close(self):
        self._closed = True
        self._flowing.set()
        _close(self._listener)
        with self._lock:
            links = list(self._links)
        for link in links:
            self._drop(link)


def _close(sock):
    _quietly(sock.shutdown, socket.SHUT_RDWR)
    _quietly(sock.close)


def _quietly(action, *args):
    try:
        action(*args)
    except OSError:
        pass
