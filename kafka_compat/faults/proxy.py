"""LinkProxy: loopback TCP links that a test can cut and heal, to partition a cluster's network.

Each link listens on its own loopback port and forwards to one target port. A test points one
peer at the link instead of the target (a broker's zookeeper.connect, or the address another
broker advertises to it), then:

- ``cut(name, "blackhole")``: nothing more is forwarded either way and new connections get no
  answer, as when packets are dropped. Bytes in flight are held, not lost, so that after
  ``heal`` the TCP streams go on as they would after retransmission, unless a peer gave up.
- ``cut(name, "reset")``: every connection of the link is reset (RST) and so is each new one,
  as a firewall rejecting the traffic would do.
- ``heal(name)``: the link forwards again.

The proxy runs an asyncio loop in a daemon thread of the test's own process, so there is no
process to leave behind; its work per byte is one read and one write of a whole chunk.
"""
from __future__ import annotations

import asyncio
import socket
import struct
import threading

MODES = ("blackhole", "reset")
CHUNK = 1 << 16


def _reset(sock: socket.socket | None) -> None:
    """Close with an RST rather than a FIN: SO_LINGER on, with a zero timeout."""
    if sock is None:
        return
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    except OSError:
        pass


class _Link:
    __slots__ = ("name", "target", "server_socket", "open", "mode", "connections", "server")

    def __init__(self, name: str, target: tuple[str, int], server_socket: socket.socket):
        self.name = name
        self.target = target
        self.server_socket = server_socket
        self.open: asyncio.Event | None = None      # made on the loop
        self.mode = None                             # None: forwarding; else one of MODES
        self.connections: set[tuple[asyncio.StreamWriter, ...]] = set()
        self.server = None


class LinkProxy:
    """Named links ``name -> (listen port, target)``; cut and heal them from any thread."""

    def __init__(self):
        self._links: dict[str, _Link] = {}
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="link-proxy", daemon=True)
        self._thread.start()

    # -- control (any thread)
    def add(self, name: str, target_port: int, target_host: str = "127.0.0.1") -> int:
        """A new link to ``target_host:target_port``; returns the loopback port it listens on (bound
        now, so the port can be handed out before anything connects)."""
        if name in self._links:
            raise ValueError(f"link {name!r} exists")
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        sock.listen(128)
        link = _Link(name, (target_host, target_port), sock)
        self._links[name] = link
        self._call(self._serve(link))
        return sock.getsockname()[1]

    def port(self, name: str) -> int:
        return self._links[name].server_socket.getsockname()[1]

    def names(self) -> list[str]:
        return list(self._links)

    def is_cut(self, name: str) -> bool:
        return self._links[name].mode is not None

    def cut(self, name: str, mode: str = "blackhole") -> None:
        """Stop the link (see the module's docstring for the modes); effective when this returns."""
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, not {mode!r}")
        self._call(self._cut(self._links[name], mode))

    def heal(self, name: str) -> None:
        self._call(self._heal(self._links[name]))

    def heal_all(self) -> None:
        for name in self._links:
            self.heal(name)

    def close(self) -> None:
        if self._loop.is_closed():
            return
        try:
            self._call(self._close_all())
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)
            self._loop.close()

    def _call(self, coro):
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(30)

    # -- on the loop
    async def _serve(self, link: _Link) -> None:
        link.open = asyncio.Event()
        link.open.set()
        link.server = await asyncio.start_server(lambda r, w: self._accept(link, r, w), sock=link.server_socket)

    async def _cut(self, link: _Link, mode: str) -> None:
        link.mode = mode
        link.open.clear()
        if mode == "reset":
            for writers in list(link.connections):
                for w in writers:
                    _reset(w.get_extra_info("socket"))
                    w.transport.abort()
            link.connections.clear()

    async def _heal(self, link: _Link) -> None:
        link.mode = None
        link.open.set()

    async def _close_all(self) -> None:
        for link in self._links.values():
            if link.server is not None:
                link.server.close()
            for writers in list(link.connections):
                for w in writers:
                    w.transport.abort()
            link.connections.clear()

    async def _accept(self, link: _Link, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        if link.mode == "reset":
            _reset(client_w.get_extra_info("socket"))
            client_w.transport.abort()
            return
        entry = (client_w,)
        link.connections.add(entry)
        try:
            await link.open.wait()                  # blackholed: the connection waits, unanswered
            if link.mode == "reset":
                return
            try:
                target_r, target_w = await asyncio.open_connection(*link.target)
            except OSError:
                _reset(client_w.get_extra_info("socket"))   # the target is down: refused, as it would be
                client_w.transport.abort()
                return
            link.connections.discard(entry)
            entry = (client_w, target_w)
            link.connections.add(entry)
            await asyncio.gather(self._pipe(link, client_r, target_w), self._pipe(link, target_r, client_w))
        finally:
            link.connections.discard(entry)
            for w in entry:
                w.transport.abort() if link.mode == "reset" else w.close()

    @staticmethod
    async def _pipe(link: _Link, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                data = await reader.read(CHUNK)
                if not data:
                    break
                if not link.open.is_set():
                    await link.open.wait()          # held, not dropped: the stream stays whole
                    if link.mode == "reset":
                        return
                writer.write(data)
                await writer.drain()
        except (OSError, asyncio.IncompleteReadError):
            pass
        finally:
            try:
                if writer.can_write_eof() and not writer.is_closing():
                    writer.write_eof()              # half-close: the other direction may still talk
            except OSError:
                pass
