"""``with_parameters``: 10 trials sharing one large numpy array (default 800 MB).

- ``pickle_roundtrip_s``: one ``cloudpickle.dumps`` + ``loads`` of the array (the target's yardstick);
- ``fit_small_s`` / ``fit_large_s``: ``fit()`` of the same 10 trials (2 at a time on 2 cores) with a
  1-element array and with the large one (medians of ``--repeat``, after a warm-up run);
  ``added_startup_s`` is their difference and
  ``added_vs_roundtrip`` its ratio to the yardstick (target: <= 2);
- each trial reads a strided sample of the array and reports it, so the data did arrive; it also
  reads the controller's memory (its parent process, as in ``bench_memory.py``): ``rss`` counts
  the pages it shares copy-on-write with the driver (the actor system is forked from it, and the
  driver holds the array), ``private`` (``Private_Clean + Private_Dirty`` of
  ``/proc/<pid>/smaps_rollup``) is what the controller holds by itself;
- ``file_route``: what a machine other than the driver's costs (multi-host): writing the object
  file once, and mapping + unpickling it in a trial process (its download from storage comes on top).
- ``--partial``: also time ``functools.partial(train, data=array)``, the old stand-in (slow: the
  array is pickled into every trial).

    python benchmarks/bench_with_parameters.py [--mb 800] [--repeat 3] [--partial]
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
import tempfile
import time
from typing import Any

import _common


def _memory(pid: int) -> dict[str, int]:
    out = {"rss": 0, "private": 0}
    with open(f"/proc/{pid}/smaps_rollup", encoding="ascii") as handle:
        for line in handle:
            key, _, rest = line.partition(":")
            if key == "Rss":
                out["rss"] = int(rest.split()[0]) * 1024
            elif key in ("Private_Clean", "Private_Dirty"):
                out["private"] += int(rest.split()[0]) * 1024
    return out


def train(config: dict[str, Any], data: Any = None) -> None:
    import os

    from actors import report

    step = max(1, data.size // 1000)
    mem = _memory(os.getppid())
    report({"sample": float(data[::step].sum()), "n": int(data.size), "controller": os.getppid(),
            "controller_rss": mem["rss"], "controller_private": mem["private"], "pid": os.getpid()})


def _fit(trainable: Any, storage: str, name: str) -> tuple[float, list[dict[str, Any]]]:
    from actors import RunConfig, TuneConfig, Tuner
    from actors.search import grid_search

    started = time.perf_counter()
    grid = Tuner(trainable, param_space={"i": grid_search(list(range(10)))},
                 tune_config=TuneConfig(max_concurrent_trials=2),
                 run_config=RunConfig(name=name, storage=storage, verbose=0, controller_timeout_s=600)).fit()
    elapsed = time.perf_counter() - started
    errors = [str(r.error) for r in grid if r.error is not None]
    if errors:
        raise SystemExit(f"{name}: {len(errors)} trials failed: {errors[0][:500]}")
    return elapsed, [r.metrics for r in grid]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=800.0)
    parser.add_argument("--partial", action="store_true")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    import cloudpickle
    import numpy as np

    from actors import with_parameters
    from actors._driver.parameters import read_object, write_object

    _common.quiet_logs()
    n = int(args.mb * 2**20 / 8)
    big = np.arange(n, dtype=np.float64)
    expected = float(big[::max(1, n // 1000)].sum())

    started = time.perf_counter()
    blob = cloudpickle.dumps(big)
    back = cloudpickle.loads(blob)
    roundtrip_s = time.perf_counter() - started
    del blob, back

    out: dict[str, Any] = {"bench": "with_parameters", "mb": args.mb, "trials": 10,
                           "pickle_roundtrip_s": round(roundtrip_s, 3)}
    with _common.temp_storage() as storage:
        tiny = with_parameters(train, data=np.arange(1, dtype=np.float64))
        large = with_parameters(train, data=big)
        _fit(tiny, storage, "warmup")  # imports and first-time costs out of the comparison
        smalls, larges = [], []
        for i in range(args.repeat):
            smalls.append(_fit(tiny, storage, f"small{i}")[0])
            large_i, rows = _fit(large, storage, f"large{i}")
            larges.append(large_i)
        small_s, large_s = _common.median(smalls), _common.median(larges)
        if {r["sample"] for r in rows} != {expected} or {r["n"] for r in rows} != {n}:
            raise SystemExit("a trial saw other data than the driver's array")
        out.update(fit_small_s=round(small_s, 3), fit_large_s=round(large_s, 3),
                   added_startup_s=round(large_s - small_s, 3),
                   added_vs_roundtrip=round((large_s - small_s) / roundtrip_s, 2),
                   trial_processes=len({r["pid"] for r in rows}),
                   controller_rss_mb=round(max(r["controller_rss"] for r in rows) / 2**20, 1),
                   controller_private_mb=round(max(r["controller_private"] for r in rows) / 2**20, 1),
                   driver_rss_mb=round(_memory(os.getpid())["rss"] / 2**20, 1))
        if args.partial:
            partial_s, _ = _fit(functools.partial(train, data=big), storage, "partial")
            out["fit_partial_s"] = round(partial_s, 3)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "obj")
        started = time.perf_counter()
        write_object(path, big, "bench")
        write_s = time.perf_counter() - started
        started = time.perf_counter()
        mapped = read_object(path)
        read_s = time.perf_counter() - started
        assert float(mapped[::max(1, n // 1000)].sum()) == expected
        del mapped
    out["file_route"] = {"write_s": round(write_s, 3), "map_and_unpickle_s": round(read_s, 4)}
    out["machine"] = _common.machine()
    _common.emit(out)


if __name__ == "__main__":
    main(sys.argv[1:])
