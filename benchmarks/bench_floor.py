"""The physical floor: the work of ``trivial`` and ``throughput`` with plain forked processes and pipes.

No tuning logic, no storage, no actor system: what this machine needs at least to

- ``trivial``: start N forked processes, 2 at a time, each sending one result dict through a pipe
  (the work of ``bench_trivial.py``; the issue's reference: 100 took 0.17 s);
- ``stream``: 2 forked processes each streaming N result dicts through a pipe as fast as they can,
  one message per result (the work of ``bench_throughput.py`` without batching);
- ``pingpong``: the same, but each result waits for the parent's one-byte answer before the next
  (the work of ``bench_throughput.py --mode per-result``: one decision per result).

Result dicts look like audition's (metric plus the auto-filled fields).

With ``--thespian-results M`` (default 500; 0 skips it) it also measures the floor of Thespian's TCP
transport as audition configures it (``_thespian_floor.py``: plain actors, plain dict messages, 2
workers x M results): ``thespian_stream`` (one tell per result, no answer), ``thespian_2hop``
(worker -> hub -> worker per result) and ``thespian_4hop`` (worker -> hub -> relay -> hub -> worker,
the per-result path of trial -> controller -> scheduler -> controller -> trial). Prints one JSON line.

    python benchmarks/bench_floor.py [--trials 100 1000] [--results 2000] [--repeat 3]
                                     [--thespian-results 500]
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import socket
import sys
import time
from multiprocessing.connection import Connection, wait
from typing import Any

import _common

_HOST = socket.gethostname()


def _result(i: int) -> dict[str, Any]:
    now = time.time()
    return {"loss": 1.0 / (i + 1), "trial_id": "floor_00000", "training_iteration": i + 1,
            "time_this_iter_s": 0.0, "time_total_s": 0.0, "timestamp": now, "done": False,
            "hostname": _HOST, "pid": os.getpid()}


def _one(conn: Connection) -> None:
    conn.send(_result(0))
    conn.close()


def _stream(conn: Connection, n: int, ack: bool) -> None:
    for i in range(n):
        conn.send(_result(i))
        if ack:
            conn.recv_bytes()
    conn.send(None)
    conn.close()


def trivial_floor(n: int, parallel: int = 2) -> float:
    """N forked processes, ``parallel`` at a time, each sending one message; wall seconds."""
    ctx = mp.get_context("fork")
    started = time.perf_counter()
    live: dict[Connection, Any] = {}
    launched = received = 0
    while received < n:
        while launched < n and len(live) < parallel:
            parent, child = ctx.Pipe(duplex=False)
            proc = ctx.Process(target=_one, args=(child,))
            proc.start()
            child.close()
            live[parent] = proc
            launched += 1
        for conn in wait(list(live)):
            assert isinstance(conn, Connection)
            conn.recv()
            conn.close()
            live.pop(conn).join()
            received += 1
    return time.perf_counter() - started


def stream_floor(n: int, ack: bool, parallel: int = 2) -> float:
    """``parallel`` forked processes each sending N messages (each answered if ``ack``); wall seconds."""
    ctx = mp.get_context("fork")
    started = time.perf_counter()
    live: dict[Connection, Any] = {}
    for _ in range(parallel):
        parent, child = ctx.Pipe(duplex=True)
        proc = ctx.Process(target=_stream, args=(child, n, ack))
        proc.start()
        child.close()
        live[parent] = proc
    got = 0
    while live:
        for conn in wait(list(live)):
            assert isinstance(conn, Connection)
            msg = conn.recv()
            if msg is None:
                conn.close()
                live.pop(conn).join()
                continue
            got += 1
            if ack:
                conn.send_bytes(b"c")
    elapsed = time.perf_counter() - started
    assert got == n * parallel, (got, n)
    return elapsed


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, nargs="+", default=[100, 1000])
    parser.add_argument("--results", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--thespian-results", type=int, default=500)
    args = parser.parse_args(argv)
    out: dict[str, Any] = {"bench": "floor", "results": args.results, "repeat": args.repeat}
    for n in args.trials:
        out[f"trivial_{n}_s"] = round(_common.median([trivial_floor(n) for _ in range(args.repeat)]), 4)
    total = 2 * args.results
    stream_s = _common.median([stream_floor(args.results, ack=False) for _ in range(args.repeat)])
    ping_s = _common.median([stream_floor(args.results, ack=True) for _ in range(args.repeat)])
    out["stream_s"] = round(stream_s, 4)
    out["stream_results_per_s"] = round(total / stream_s)
    out["pingpong_s"] = round(ping_s, 4)
    out["pingpong_results_per_s"] = round(total / ping_s)
    if args.thespian_results > 0:
        import _thespian_floor

        m = args.thespian_results
        out["thespian_results"] = m
        for name, hops in (("stream", 0), ("2hop", 2), ("4hop", 4)):
            seconds = _common.median([_thespian_floor.measure(m, hops) for _ in range(args.repeat)])
            out[f"thespian_{name}_results_per_s"] = round(2 * m / seconds)
    _common.emit(out)


if __name__ == "__main__":
    main(sys.argv[1:])
