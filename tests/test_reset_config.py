"""Trainable.reset_config with reused actors (Ray Tune's contract): True switches the instance to
the next trial's config in place, without setup(); False, or no override, builds a fresh one."""

from __future__ import annotations

import itertools
import os
from typing import Any

import pytest

from actors import RunConfig, Trainable, TuneConfig, Tuner
from actors.search import grid_search

_SERIAL = itertools.count()  # per process: tells instances apart (id() may be reused)


class Counting(Trainable):
    def setup(self, config: dict[str, Any]) -> None:
        self.serial = next(_SERIAL)
        self.setups = getattr(self, "setups", 0) + 1
        self.resets = 0
        self.steps = 0

    def step(self) -> dict[str, Any]:
        self.steps += 1
        return {"loss": self.config["x"] / self.steps, "setups": self.setups, "resets": self.resets,
                "instance": self.serial, "pid": os.getpid(), "done": self.steps >= 2}


class Resetting(Counting):
    def reset_config(self, new_config: dict[str, Any]) -> bool:
        self.resets += 1
        self.steps = 0
        return True


class Refusing(Counting):
    def reset_config(self, new_config: dict[str, Any]) -> bool:
        return False


def _fit(cls: type, storage_dir: str, system: str) -> list[dict[str, Any]]:
    grid = Tuner(cls, param_space={"x": grid_search([1.0, 2.0, 3.0, 4.0])},
                 tune_config=TuneConfig(metric="loss", mode="min", max_concurrent_trials=1, reuse_actors=True),
                 run_config=RunConfig(name="reset", storage=storage_dir, verbose=0, system=system)).fit()
    assert grid.num_errors == 0
    rows = sorted((r.metrics for r in grid), key=lambda m: m["timestamp"])
    for r in grid:
        assert r.metrics["loss"] == r.config["x"] / 2  # each trial ran with its own config
    return rows


@pytest.mark.parametrize("system", ["simple", "multiproc"])
def test_reset_config_true_reuses_the_instance_without_setup(system, storage_dir, no_leaks) -> None:
    rows = _fit(Resetting, storage_dir, system)
    assert len({r["instance"] for r in rows}) == 1 and len({r["pid"] for r in rows}) == 1
    assert [r["setups"] for r in rows] == [1, 1, 1, 1]
    assert [r["resets"] for r in rows] == [0, 1, 2, 3]  # one reset_config() per later trial


def test_reset_config_false_builds_a_fresh_instance(storage_dir, no_leaks) -> None:
    rows = _fit(Refusing, storage_dir, "multiproc")
    assert [r["setups"] for r in rows] == [1, 1, 1, 1]
    assert len({r["instance"] for r in rows}) == 4  # a fresh Trainable (and setup) per trial
    assert len({r["pid"] for r in rows}) == 1  # while the actor itself is still reused
