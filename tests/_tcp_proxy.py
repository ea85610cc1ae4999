"""A loopback TCP proxy that injects network faults between a client and a real server.

Runs an asyncio loop in a daemon thread. Modes apply to new and already-open (pooled keep-alive)
connections alike:

- ``pass_through()``: forward everything;
- ``reset_after(nbytes, times)``: after ``nbytes`` more client->server bytes, reset the connection
  that carries them; re-arm until ``times`` resets happened, then pass again. ``times=None``: after
  the first ``nbytes`` reset everything from then on (the network is gone);
- ``reset_connections(count)``: reset the next ``count`` connections (``None``: all, until changed)
  as soon as they connect or send anything;
- ``stall()``: hold all data in both directions until the mode changes; nothing is dropped or
  closed, so after ``pass_through()`` the held bytes flow on (a stall that ends). Held traffic is
  counted: ``held_bytes`` and ``held_connections`` (connections that had data held at least once).
"""

from __future__ import annotations

import asyncio
import socket
import struct
import threading
from dataclasses import dataclass

_CHUNK = 65536


@dataclass(eq=False)
class _Conn:
    client: asyncio.StreamWriter
    upstream: asyncio.StreamWriter | None = None
    dead: bool = False
    held: bool = False


class TcpProxy:
    def __init__(self, upstream_host: str, upstream_port: int) -> None:
        self.upstream = (upstream_host, upstream_port)
        self._lock = threading.Lock()
        self._mode = "pass"
        self._budget = 0
        self._nbytes = 0
        self._resets_left: int | None = 0
        self.resets = 0
        self.connections = 0
        self.held_bytes = 0  # bytes that had to wait because of stall()
        self.held_connections = 0  # connections that had data held at least once
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="tcp-proxy", daemon=True)
        self._server: asyncio.base_events.Server | None = None
        self._conns: set[_Conn] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self._changed: asyncio.Event | None = None
        self.port = 0

    # -- lifecycle ---------------------------------------------------------------------------
    def start(self) -> TcpProxy:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(10)
        return self

    async def _start(self) -> None:
        self._changed = asyncio.Event()
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def stop(self) -> None:
        async def shutdown() -> None:
            if self._server is not None:
                self._server.close()
            for conn in list(self._conns):
                self._kill(conn, reset=False)
            self._notify()  # wake stalled pumps so they see their connection is gone
            if self._tasks:
                await asyncio.wait(list(self._tasks), timeout=5)

        if self._thread.is_alive():
            asyncio.run_coroutine_threadsafe(shutdown(), self._loop).result(10)
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)
        self._loop.close()

    def __enter__(self) -> TcpProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- modes (callable from any thread) -------------------------------------------------------
    def _set(self, mode: str, *, nbytes: int = 0, count: int | None = 0) -> None:
        with self._lock:
            self._mode, self._nbytes, self._budget, self._resets_left = mode, nbytes, nbytes, count
        self._loop.call_soon_threadsafe(self._notify)

    def _notify(self) -> None:
        assert self._changed is not None
        self._changed.set()
        self._changed = asyncio.Event()

    def pass_through(self) -> None:
        self._set("pass")

    def reset_after(self, nbytes: int, times: int | None = 1) -> None:
        self._set("reset_after", nbytes=nbytes, count=times)

    def reset_connections(self, count: int | None = None) -> None:
        self._set("reset", count=count)

    def stall(self) -> None:
        self._set("stall")

    # -- data path (event loop thread) ----------------------------------------------------------
    def _take_reset(self) -> bool:
        """In 'reset' mode: whether this connection is reset (and count it)."""
        with self._lock:
            if self._mode != "reset":
                return False
            if self._resets_left is not None:
                self._resets_left -= 1
                if self._resets_left <= 0:
                    self._mode = "pass"
            self.resets += 1
            return True

    def _spend(self, size: int) -> bool:
        """In 'reset_after' mode: charge client bytes; True if this chunk crosses the budget."""
        with self._lock:
            if self._mode != "reset_after":
                return False
            self._budget -= size
            if self._budget >= 0:
                return False
            self.resets += 1
            if self._resets_left is None:
                self._mode = "reset"  # permanent from now on
                return True
            self._resets_left -= 1
            if self._resets_left > 0:
                self._budget = self._nbytes
            else:
                self._mode = "pass"
            return True

    def _kill(self, conn: _Conn, reset: bool = True) -> None:
        conn.dead = True
        self._conns.discard(conn)
        for writer in (conn.client, conn.upstream):
            if writer is None:
                continue
            sock = writer.get_extra_info("socket")
            if reset and sock is not None and writer is conn.client:
                try:
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                except OSError:
                    pass
            writer.transport.abort()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        self.connections += 1
        conn = _Conn(client=writer)
        self._conns.add(conn)
        if self._take_reset():
            self._kill(conn)
            return
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.upstream)
        except OSError:
            self._kill(conn)
            return
        conn.upstream = up_writer
        await asyncio.gather(
            self._pump(reader, up_writer, conn, to_server=True),
            self._pump(up_reader, writer, conn, to_server=False),
            return_exceptions=True,
        )
        self._kill(conn, reset=False)

    async def _pump(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, conn: _Conn,
                    *, to_server: bool) -> None:
        while not conn.dead:
            try:
                data = await reader.read(_CHUNK)
            except (ConnectionError, OSError):
                break
            if not data:
                break
            if self._mode == "stall" and not conn.dead:
                self.held_bytes += len(data)
                if not conn.held:
                    conn.held = True
                    self.held_connections += 1
            while self._mode == "stall" and not conn.dead:
                assert self._changed is not None
                await self._changed.wait()
            if conn.dead:
                return
            if self._take_reset() or (to_server and self._spend(len(data))):
                self._kill(conn)
                return
            try:
                writer.write(data)
                await writer.drain()
            except (ConnectionError, OSError):
                break
        self._kill(conn, reset=False)
