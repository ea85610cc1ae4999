"""A trial process's Python logging is a new interpreter's, as a Ray worker's (``actors/_worker/trial_logging.py``).

Run under Ray 2.60 (``/work/rayvenv``, 2026-12-06): in a trial the root logger is at WARNING with no handler;
``logging.getLogger(...).warning`` shows on the driver's console with the trial's prefix and ``info`` does
not; ``logging.getLogger().addHandler(...)`` and ``logging.basicConfig(force=True, ...)`` work. In audition's
trial processes Thespian's root logger refused both calls (``NotImplementedError``: the trial failed) and sent
warnings to the admin's stderr, past the trial's ``stderr.txt``.
"""

from __future__ import annotations

import glob
import logging
import os
import sys
from typing import Any

from actors import RunConfig, TuneConfig, Tuner, grid_search, report
from actors._worker.trial_logging import plain_root_logging


def _logs(config: dict[str, Any]) -> None:
    root = logging.getLogger()
    shape = {"level": logging.getLevelName(root.level), "handlers": len(root.handlers)}
    log = logging.getLogger("trial.code")
    log.info("INFO-LINE")
    log.warning("WARNING-LINE")
    if config["how"] == "add_handler":
        root.addHandler(logging.StreamHandler(sys.stdout))
        log.warning("HANDLED-LINE")
    elif config["how"] == "basic_config":
        logging.basicConfig(level=logging.INFO, force=True, format="FORMATTED %(message)s")
        log.info("CONFIGURED-LINE")
    report({"root": f"{shape['level']}/{shape['handlers']}"})


def test_trials_log_as_in_a_new_interpreter(tmp_path, no_leaks):
    # reuse_actors=False, Ray 2.60's default: with audition's default a trial run after another in the same
    # process (2 CPUs, 3 trials) inherits the handler "add_handler" added, as it would in a reused Ray worker
    grid = Tuner(_logs, param_space={"how": grid_search(["plain", "add_handler", "basic_config"])},
                 tune_config=TuneConfig(reuse_actors=False),
                 run_config=RunConfig(storage_path=str(tmp_path), name="logs", verbose=0)).fit()
    by_how = {r.config["how"]: r for r in grid}
    assert all(r.error is None for r in grid), [r.error for r in grid]
    assert {r.metrics["root"] for r in grid} == {"WARNING/0"}

    def out(how: str, name: str) -> str:
        files = glob.glob(os.path.join(by_how[how].path, name))
        return open(files[0]).read() if files else ""

    assert "WARNING-LINE" in out("plain", "stderr.txt") and "INFO-LINE" not in out("plain", "stderr.txt")
    assert "HANDLED-LINE" in out("add_handler", "stdout.txt")
    assert "FORMATTED CONFIGURED-LINE" in out("basic_config", "stderr.txt")


def test_only_thespians_root_logger_is_replaced():
    before = logging.root
    assert plain_root_logging() is False  # (this process's root is a plain one: left alone)
    assert logging.root is before
