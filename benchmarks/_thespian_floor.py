"""Actors for the Thespian floor in ``bench_floor.py``: audition's message pattern with no tuning logic.

A ``Hub`` (the controller's place) creates ``workers`` ``Worker`` actors (trial actors) and, for
``hops=4``, a ``Relay`` (the scheduler actor). Each worker sends ``n`` result dicts to the hub:

- ``hops=0``: as fast as it can, one message per result, no answer (a stream of tells);
- ``hops=2``: each result waits for the hub's answer (trial -> controller -> trial);
- ``hops=4``: the hub first passes each result to the relay and answers the worker when the relay
  answers (trial -> controller -> scheduler -> controller -> trial: audition's per-result path).

The hub answers the driver's ``go`` with the elapsed seconds once every worker is done. Messages
are plain dicts, so nothing but Thespian's transport is measured.
"""

from __future__ import annotations

import time
from typing import Any

from thespian.actors import Actor, ActorExitRequest


def result_dict(i: int) -> dict[str, Any]:
    return {"loss": 1.0 / (i + 1), "trial_id": "floor_00000", "training_iteration": i + 1,
            "time_this_iter_s": 0.0, "time_total_s": 0.0, "timestamp": time.time(), "done": False,
            "hostname": "localhost", "pid": 0}


class Worker(Actor):
    def __init__(self) -> None:
        super().__init__()
        self.n = 0
        self.sent = 0
        self.hub: Any = None
        self.wid = 0

    def receiveMessage(self, msg: Any, sender: Any) -> None:
        if not isinstance(msg, dict):
            return
        if msg["op"] == "start":
            self.hub, self.n, self.wid = sender, msg["n"], msg["wid"]
            if msg["hops"] == 0:
                for i in range(self.n):
                    self.send(self.hub, {"op": "result", "wid": self.wid, "result": result_dict(i)})
                return
            self._next()
        elif msg["op"] == "ack":
            self._next()

    def _next(self) -> None:
        if self.sent < self.n:
            self.send(self.hub, {"op": "result", "wid": self.wid, "result": result_dict(self.sent)})
            self.sent += 1


class Relay(Actor):
    def receiveMessage(self, msg: Any, sender: Any) -> None:
        if isinstance(msg, dict) and msg.get("op") == "call":
            self.send(sender, {"op": "reply", "wid": msg["wid"]})


class Hub(Actor):
    def __init__(self) -> None:
        super().__init__()
        self.driver: Any = None
        self.workers: list[Any] = []
        self.relay: Any = None
        self.hops = 0
        self.expected = 0
        self.got = 0
        self.started = 0.0

    def receiveMessage(self, msg: Any, sender: Any) -> None:
        if not isinstance(msg, dict):
            return
        op = msg["op"]
        if op == "go":
            self.driver, self.hops = sender, msg["hops"]
            self.expected, self.got = msg["n"] * msg["workers"], 0
            self.workers = [self.createActor(Worker) for _ in range(msg["workers"])]
            if self.hops == 4:
                self.relay = self.createActor(Relay)
            self.started = time.perf_counter()
            for wid, w in enumerate(self.workers):
                self.send(w, {"op": "start", "n": msg["n"], "hops": self.hops, "wid": wid})
        elif op == "result":
            self.got += 1
            if self.hops == 2:
                self.send(self.workers[msg["wid"]], {"op": "ack"})
            elif self.hops == 4:
                self.send(self.relay, {"op": "call", "wid": msg["wid"], "result": msg["result"]})
            self._maybe_done()
        elif op == "reply":
            self.send(self.workers[msg["wid"]], {"op": "ack"})

    def _maybe_done(self) -> None:
        if self.got == self.expected:
            self.send(self.driver, {"op": "done", "elapsed": time.perf_counter() - self.started})
            for w in self.workers:
                self.send(w, ActorExitRequest())
            if self.relay is not None:
                self.send(self.relay, ActorExitRequest())


def measure(n: int, hops: int, workers: int = 2) -> float:
    """Seconds for ``workers`` x ``n`` results on audition's own multi-process system (TCP, loopback)."""
    import datetime

    from actors._driver.system import actor_system

    with actor_system("multiproc") as asys:
        hub = asys.createActor(Hub)
        answer = asys.ask(hub, {"op": "go", "n": n, "hops": hops, "workers": workers},
                          datetime.timedelta(seconds=300))
        if not isinstance(answer, dict) or answer.get("op") != "done":
            raise RuntimeError(f"the Thespian floor got {answer!r}")
        return float(answer["elapsed"])


__all__ = ["Hub", "Relay", "Worker", "measure"]
