"""Start-up latency: one trial, one result.

- ``process_s``: a fresh ``python bench_startup.py --inner`` from spawn to exit, timed from outside
  (interpreter start, imports, Tuner(...), fit(), actor-system shutdown, exit);
- ``fit_to_first_result_s``: the trainable records ``time.time()`` in its report; minus the
  ``time.time()`` taken just before ``fit()`` is called (actor system start, controller, scheduler
  actor, the first trial actor, the worker thread, the trainable unpickled and called);
- ``tuner_to_first_result_s``: the same from just before ``Tuner(...)`` (adds validation, pickling);
- ``fit_s``: the whole fit() call; ``import_s``: ``import actors`` plus ``Tuner`` in the child.

Repeated ``--repeat`` times (fresh processes); medians. Prints one JSON line.

    python benchmarks/bench_startup.py [--repeat 5] [--system multiproc|simple]
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

_T0 = time.time()

import _common  # noqa: E402


def first(config: dict[str, Any]) -> None:
    import time

    from actors import report

    report({"t": time.time()})


def inner(system: str) -> dict[str, Any]:
    import_started = time.perf_counter()
    from actors import RunConfig, Tuner

    import_s = time.perf_counter() - import_started
    _common.quiet_logs()
    with _common.temp_storage() as storage:
        t_tuner = time.time()
        tuner = Tuner(first, run_config=RunConfig(name="startup", storage=storage, verbose=0, system=system))
        t_fit = time.time()
        grid = tuner.fit()
        fit_s = time.time() - t_fit
    t_result = grid[0].metrics["t"]
    return {"bench": "startup", "system": system, "import_s": round(import_s, 4),
            "fit_to_first_result_s": round(t_result - t_fit, 4),
            "tuner_to_first_result_s": round(t_result - t_tuner, 4), "fit_s": round(fit_s, 4),
            "script_start_to_first_result_s": round(t_result - _T0, 4)}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--system", default="multiproc", choices=["multiproc", "simple"])
    parser.add_argument("--inner", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.inner:
        _common.emit(inner(args.system))
        return
    keys = ["import_s", "fit_to_first_result_s", "tuner_to_first_result_s", "fit_s",
            "script_start_to_first_result_s"]
    _common.emit(_common.repeat_self(__file__, ["--system", args.system], args.repeat, keys))


if __name__ == "__main__":
    main(sys.argv[1:])
