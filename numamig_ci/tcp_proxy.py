"""A TCP proxy a test controls: forwards, cuts, refuses, forwards again.

It stands between a migration's source and destination (the migration
URI names the proxy's address, or a host's agent gives its peers the
proxy's port for its libvirtd) so that a test or numamig-ci can break
the link at a moment it chooses: ``cut`` resets every forwarded
connection and stops listening, so that new connections are refused
(ECONNREFUSED, as by a host whose port is closed) until ``restore``
listens again. ``forwarded`` counts the bytes carried towards the
destination, so a test can cut once post-copy is under way.

Refusing means not listening, not accepting and resetting: QEMU 7.2's
source, handed a connection that is reset during the post-copy recovery
handshake, stays in ``postcopy-recover`` for good (measured), which is
a different failure from a link that is down.
"""

import socket
import struct
import threading

# SO_LINGER on, zero seconds: close() resets the connection (RST) rather
# than ending it (FIN), as a dropped link or a refusing port does.
_RESET = struct.pack('ii', 1, 0)
BUFFER = 256 * 1024


def reset(sock):
    """Reset ``sock``'s connection now, even while a pump thread waits
    in ``recv`` on it.

    close() alone only drops the descriptor: the kernel keeps the socket,
    and sends nothing, until that ``recv`` returns, which on a quiet
    direction (a destination asking for no page) is never; the peer then
    never learns of the cut (measured: a post-copy destination left
    waiting, the source's migrateToURI3 with it). shutdown(SHUT_RD)
    sends nothing on TCP but wakes the ``recv``; the socket is then
    released with linger zero, a reset.
    """
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _RESET)
        sock.shutdown(socket.SHUT_RD)
    except OSError:
        pass
    sock.close()


class TCPProxy:
    """Listens on ``listen`` (host, port), forwards to ``target``, from
    ``restore`` until ``close`` (tests.fixtures.tcp_proxy makes it a
    fixture)."""

    def __init__(self, listen, target):
        self.listen, self.target = listen, target
        self.forwarded = 0
        self.accepted = 0
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._conns = set()
        self._listener = None
        self._threads = []

    def cut(self):
        """Reset every forwarded connection; refuse new ones."""
        with self._lock:
            listener, self._listener = self._listener, None
            conns, self._conns = self._conns, set()
        if listener is not None:
            _stop_listening(listener)
        for sock in conns:
            reset(sock)

    def restore(self):
        """Listen and forward new connections again."""
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(self.listen)
        listener.listen(16)
        with self._lock:
            self._listener = listener
        self._spawn(self._accept_loop, listener)

    def wait_forwarded(self, count, timeout):
        """Wait until ``count`` bytes went to the target; False if not
        within ``timeout`` seconds."""
        with self._changed:
            return self._changed.wait_for(lambda: self.forwarded >= count,
                                          timeout)

    def _spawn(self, target, *args):
        thread = threading.Thread(target=target, args=args, daemon=True,
                                  name='test-tcp-proxy')
        thread.start()
        self._threads.append(thread)

    def _accept_loop(self, listener):
        while True:
            try:
                client, _addr = listener.accept()
            except OSError:
                return  # cut, or clean-up
            try:
                upstream = socket.create_connection(self.target, timeout=5)
                upstream.settimeout(None)
            except OSError:
                reset(client)
                continue
            self.accepted += 1
            with self._lock:
                self._conns.update((client, upstream))
            self._spawn(self._pump, client, upstream, True)
            self._spawn(self._pump, upstream, client, False)

    def _pump(self, src, dst, towards_target):
        try:
            while True:
                data = src.recv(BUFFER)
                if not data:
                    break
                dst.sendall(data)
                if towards_target:
                    with self._changed:
                        self.forwarded += len(data)
                        self._changed.notify_all()
        except OSError:
            pass
        # One side ended or was reset: so does the other.
        with self._lock:
            mine = src in self._conns
            self._conns.discard(src)
            self._conns.discard(dst)
        if mine:
            reset(dst)
            reset(src)

    def close(self):
        """Cut, and wait a little for the forwarding threads to end."""
        self.cut()
        for thread in self._threads:
            thread.join(5)


def _stop_listening(listener):
    # shutdown wakes the accept() blocked in the loop; close alone would
    # leave the socket listening while accept() holds it.
    try:
        listener.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    listener.close()
