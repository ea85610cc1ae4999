"""A second ``Tuner.fit()`` on the same ``Tuner``, as Ray Tune 2.60 runs it (recorded by
``benchmarks/ray_oracle/record_fit_twice.py`` into ``tests/data/ray_fit_twice.json``).

Before: the default generator drawn out by the first run was handed back to the Tuner, so the second
``fit()`` ran no trial and returned an empty ``ResultGrid``, silently, where Ray runs the trials again.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from actors import RunConfig, TuneConfig, Tuner, report
from actors.search import OptunaSearch, grid_search, uniform

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "benchmarks", "ray_oracle"))
from record_fit_twice import STEPS, fits_row  # (the recorder's view, run here)

with open(os.path.join(os.path.dirname(__file__), "data", "ray_fit_twice.json")) as _f:
    RAY: dict[str, Any] = json.load(_f)


def _train(config: dict[str, Any]) -> None:
    for i in range(1, STEPS + 1):
        report({"loss": config["a"] * i})


@pytest.mark.parametrize("system", ["multiproc", "simple"])
def test_a_second_fit_runs_the_grid_again_as_rays(tmp_path: Path, system: str, no_leaks: Any) -> None:
    tuner = Tuner(_train, param_space={"a": grid_search([1, 2])},
                  run_config=RunConfig(name="s", storage_path=str(tmp_path), verbose=0, system=system))
    first = tuner.fit()
    second = tuner.fit()
    assert fits_row(first, second) == RAY["grid"]
    assert second.experiment_path.endswith("/s_2")  # (a taken name: docs/coming-from-ray.md)


def test_a_second_fit_with_a_searcher_goes_on_with_it(tmp_path: Path, no_leaks: Any) -> None:
    """Ray raises ValueError (recorded: the searcher already has a space); audition's searcher goes on, its
    study holding the first run's trials too (a documented difference)."""
    assert RAY["optuna_second"] == "ValueError"
    searcher = OptunaSearch(seed=0)
    tuner = Tuner(_train, param_space={"a": uniform(0, 1)},
                  tune_config=TuneConfig(metric="loss", mode="min", num_samples=2, search_alg=searcher),
                  run_config=RunConfig(name="o", storage_path=str(tmp_path), verbose=0, system="simple"))
    first = tuner.fit()
    second = tuner.fit()
    assert len(first) == len(second) == 2 and not {r.config["a"] for r in first} & {r.config["a"] for r in second}
    assert len(searcher._study.trials) == 4
