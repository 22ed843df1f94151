"""The test proxy's cut reaches both peers at once, quiet or not.

The post-copy recovery tests cut a migration stream whose destination
may send nothing for a long while; a cut that waited for that side's
next byte left the destination unaware and the source's migration call
blocked (a CI stall). Here neither side sends anything after the
connection is set up.
"""

import socket
import threading

from tests import base
from tests.fixtures import libvirt_daemons
from tests.fixtures import tcp_proxy

DEADLINE_S = 5


class TCPProxyCutTest(base.TestCase):

    def setUp(self):
        super().setUp()
        self.server = socket.create_server(('127.0.0.1', 0))
        self.addCleanup(self.server.close)
        port = self.server.getsockname()[1]
        listen = ('127.0.0.1', libvirt_daemons.free_port())
        self.proxy = self.useFixture(tcp_proxy.TCPProxy(
            listen, ('127.0.0.1', port)))
        self.client = socket.create_connection(listen, timeout=DEADLINE_S)
        self.addCleanup(self.client.close)
        self.server.settimeout(DEADLINE_S)
        self.upstream, _ = self.server.accept()
        self.addCleanup(self.upstream.close)
        self.upstream.settimeout(DEADLINE_S)
        # Through the proxy once, so both pumps wait in recv.
        self.client.sendall(b'x')
        self.assertEqual(b'x', self.upstream.recv(1))

    def _ended(self, sock):
        """How a quiet peer learns the connection ended: 'reset' or
        'closed'; fails if it does not within DEADLINE_S."""
        try:
            data = sock.recv(1)
        except ConnectionResetError:
            return 'reset'
        except TimeoutError:
            self.fail(f"no word of the cut within {DEADLINE_S} s")
        self.assertEqual(b'', data)
        return 'closed'

    def test_cut_resets_both_quiet_peers(self):
        seen = {}
        waiters = [threading.Thread(
            target=lambda n=name, s=sock: seen.__setitem__(n, self._ended(s)))
            for name, sock in (('client', self.client),
                               ('destination', self.upstream))]
        for waiter in waiters:
            waiter.start()
        self.proxy.cut()
        for waiter in waiters:
            waiter.join(DEADLINE_S + 1)
        self.assertEqual({'client': 'reset', 'destination': 'reset'}, seen)

    def test_cut_refuses_new_connections(self):
        self.proxy.cut()
        self.assertRaises(ConnectionRefusedError, socket.create_connection,
                          self.proxy.listen, DEADLINE_S)
