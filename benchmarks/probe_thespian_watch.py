"""How often Thespian's TCP transport wakes a ``ThespianWatch``-ing actor for a descriptor that is not
readable (a stale wake-up), or no longer watched (closed): the reason ``actors/_shell/decision_server.py``
never blocks in ``recv``/``accept``.

Two clients each do N request/answer round trips of one byte over a Unix socket with an actor that
watches the socket and, for each request, also sends a Thespian message (a transmit inside the
handler). Prints one JSON line: reads, stale wake-ups of a connection (nothing to read) and of the
listener (nothing to accept), wake-ups for connections already closed.

    python benchmarks/probe_thespian_watch.py [--n 3000]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import threading
import time
from typing import Any

from thespian.actors import ActorExitRequest, ActorSystem, ActorTypeDispatcher, ThespianWatch, WatchMessage

ADDRESS = f"\0audition-watch-probe-{os.getpid()}"


class Sink(ActorTypeDispatcher):
    def receiveMsg_str(self, msg: str, sender: Any) -> None:
        pass


class Watcher(ActorTypeDispatcher):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.listener: socket.socket | None = None
        self.conns: dict[int, socket.socket] = {}
        self.sink: Any = None
        self.counts = {"reads": 0, "stale": 0, "stale_listener": 0, "closed": 0}

    def receiveMsg_str(self, msg: str, sender: Any) -> None:
        if msg == "start":
            self.listener = socket.socket(socket.AF_UNIX)
            self.listener.bind(ADDRESS)
            self.listener.listen()
            self.listener.setblocking(False)
            self.sink = self.createActor(Sink)
            self.send(sender, "ready")
        else:
            self.send(sender, json.dumps(self.counts))

    def receiveMsg_WatchMessage(self, msg: WatchMessage, sender: Any) -> None:
        assert self.listener is not None
        for fd in msg.ready:
            if fd == self.listener.fileno():
                try:
                    conn, _ = self.listener.accept()
                    self.conns[conn.fileno()] = conn
                except BlockingIOError:
                    self.counts["stale_listener"] += 1
                continue
            conn = self.conns.get(fd)
            if conn is None:
                self.counts["closed"] += 1
                continue
            try:
                data = conn.recv(65536, socket.MSG_DONTWAIT)
            except BlockingIOError:
                self.counts["stale"] += 1
                continue
            if not data:
                del self.conns[fd]
                conn.close()
                continue
            self.counts["reads"] += 1
            for _ in range(data.count(b"x")):
                self.send(self.sink, "y" * 100)
                conn.sendall(b"a")

    def receiveMessage(self, msg: Any, sender: Any) -> Any:
        super().receiveMessage(msg, sender)
        if self.listener is None or isinstance(msg, ActorExitRequest):
            return None
        return ThespianWatch([self.listener.fileno(), *self.conns])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=3000)
    args = parser.parse_args()
    asys = ActorSystem("multiprocTCPBase", {"Admin Port": 19000 + os.getpid() % 1000})
    try:
        watcher = asys.createActor(Watcher)
        assert asys.ask(watcher, "start", 10) == "ready"

        def client() -> None:
            c = socket.socket(socket.AF_UNIX)
            c.connect(ADDRESS)
            for _ in range(args.n):
                c.sendall(b"x")
                c.recv(1)
            c.close()

        threads = [threading.Thread(target=client) for _ in range(2)]
        started = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        elapsed = time.perf_counter() - started
        time.sleep(0.5)  # wake-ups for the closed connections arrive after the clients are done
        counts = json.loads(asys.ask(watcher, "report", 10))
        print(json.dumps({"probe": "thespian_watch", "round_trips": 2 * args.n, "seconds": round(elapsed, 2),
                          **counts}))
    finally:
        asys.shutdown()


if __name__ == "__main__":
    main()
