"""A driver whose trainable, stopper, callback and scheduler are defined in ``__main__`` (test_fresh_start.py).

Run as a script (``_fresh_driver.py STORAGE [key]``) with ``AUDITION_START_METHOD`` set by the test: in a
fresh actor system none of these is importable by name in the trial processes. Prints one JSON line: what
each trial saw and what the driver got back. ``json.audition_mark`` is set here at run time: a forked trial
sees it, a fresh one does not.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

from actors import Callback, RunConfig, Stopper, TuneConfig, Tuner, report
from actors.schedulers import FIFOScheduler


class Halve:  # a value of a class of __main__ in the config and in results
    def __init__(self, x: float) -> None:
        self.x = x

    def half(self) -> float:
        return self.x / 2


class StopAtThree(Stopper):
    def __call__(self, trial_id: str, result: dict[str, Any]) -> bool:
        return bool(result["training_iteration"] >= 3)

    def stop_all(self) -> bool:
        return False


class Seen(Callback):
    def __init__(self) -> None:
        self.results = 0

    def on_trial_result(self, iteration: int, trials: list, trial: Any, result: dict, **info: Any) -> None:
        self.results += 1


class MyFIFO(FIFOScheduler):
    def on_trial_add(self, tune_controller: Any, trial: Any) -> None:
        os.write(1, b"written to fd 1 by the scheduler's process\n")  # (as a C library would)
        super().on_trial_add(tune_controller, trial)


def train(config: dict[str, Any]) -> None:
    from actors._cluster.auth import authentication_enabled

    marked = hasattr(json, "audition_mark")
    for _ in range(10):
        report({"score": config["f"](config["h"].half()), "marked": marked, "h": Halve(1.0),
                "signed": authentication_enabled()})


if __name__ == "__main__":
    json.audition_mark = True  # type: ignore[attr-defined]
    if sys.argv[2:] == ["key"]:  # a cluster key enabled in code, not from the environment
        from actors._cluster.auth import enable_authentication

        enable_authentication(b"k" * 32)
    seen = Seen()
    grid = Tuner(train, param_space={"h": Halve(4.0), "f": lambda v: v + 1, "driver": os.getpid()},
                 tune_config=TuneConfig(metric="score", mode="max", num_samples=2, scheduler=MyFIFO()),
                 run_config=RunConfig(storage_path=sys.argv[1], name="fresh", verbose=0, stop=StopAtThree(),
                                      callbacks=[seen])).fit()
    print(json.dumps({"errors": [str(e) for e in grid.errors], "scores": [r.metrics["score"] for r in grid],
                      "iterations": [r.metrics["training_iteration"] for r in grid],
                      "marked": [r.metrics["marked"] for r in grid],
                      "signed": [r.metrics["signed"] for r in grid], "h": [r.metrics["h"].half() for r in grid],
                      "callback_results": seen.results}), flush=True)
