"""Each trial runs in a directory of its own, as in Ray Tune (``actors/_worker/workdir.py``).

Recorded from Ray 2.60 (a 2-trial grid whose function writes ``artifact.txt`` and reports ``os.getcwd()``):
each trial's working directory is a directory of that trial's own, and the driver's directory gets no
``artifact.txt``. ``RAY_CHDIR_TO_TRIAL_DIR=0`` keeps trials in the driver's directory (Ray's switch).
"""

from __future__ import annotations

import os
import sys
from typing import Any

import pytest

from actors import RunConfig, Tuner, get_context, report
from actors.search import grid_search


def writes_relative(config: dict[str, Any]) -> None:
    with open("artifact.txt", "w") as fh:
        fh.write(str(config["k"]))
    import helper_beside_the_driver  # found through sys.path's '' = the driver's directory, not the trial's

    report({"cwd": os.getcwd(), "trial_dir": get_context().get_trial_dir(), "helper": helper_beside_the_driver.VALUE,
            "orig": os.environ.get("TUNE_ORIG_WORKING_DIR")})


@pytest.fixture
def driver_dir(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> str:
    """A driver started in its own directory, with a module beside it importable through ''."""
    d = tmp_path / "driver"
    d.mkdir()
    (d / "helper_beside_the_driver.py").write_text("VALUE = 7\n")
    monkeypatch.chdir(d)
    monkeypatch.syspath_prepend("")
    monkeypatch.delitem(sys.modules, "helper_beside_the_driver", raising=False)
    return str(d)


def test_each_trial_runs_in_its_own_directory(driver_dir: str, storage_dir: str, no_leaks: Any) -> None:
    grid = Tuner(writes_relative, param_space={"k": grid_search([1, 2])},
                 run_config=RunConfig(storage=storage_dir, verbose=0)).fit()
    assert grid.num_errors == 0, [r.error for r in grid]
    for r in grid:
        assert r.metrics["cwd"] == r.metrics["trial_dir"] == r.path  # local storage: the trial's own directory
        assert open(os.path.join(r.path, "artifact.txt")).read() == str(r.config["k"])
        assert r.metrics["helper"] == 7 and r.metrics["orig"] == driver_dir
    assert os.getcwd() == driver_dir and not os.path.exists(os.path.join(driver_dir, "artifact.txt"))


def test_ray_chdir_to_trial_dir_0_keeps_trials_in_the_drivers_directory(
        driver_dir: str, storage_dir: str, monkeypatch: pytest.MonkeyPatch, no_leaks: Any) -> None:
    monkeypatch.setenv("RAY_CHDIR_TO_TRIAL_DIR", "0")
    grid = Tuner(writes_relative, param_space={"k": 5}, run_config=RunConfig(storage=storage_dir, verbose=0)).fit()
    assert grid.num_errors == 0 and grid[0].metrics["cwd"] == driver_dir
    assert open(os.path.join(driver_dir, "artifact.txt")).read() == "5"


def test_a_bad_switch_fails_the_trial_naming_it(driver_dir: str, storage_dir: str, monkeypatch: pytest.MonkeyPatch,
                                                 no_leaks: Any) -> None:
    monkeypatch.setenv("RAY_CHDIR_TO_TRIAL_DIR", "yes")
    grid = Tuner(writes_relative, param_space={"k": 5}, run_config=RunConfig(storage=storage_dir, verbose=0)).fit()
    assert grid.num_errors == 1 and "RAY_CHDIR_TO_TRIAL_DIR='yes': use 1" in str(grid[0].error)


def test_simple_system_trials_stay_in_the_drivers_directory(driver_dir: str, storage_dir: str) -> None:
    """In-process trials are threads of the driver: moving would move the driver (documented)."""
    grid = Tuner(writes_relative, param_space={"k": 3},
                 run_config=RunConfig(storage=storage_dir, verbose=0, system="simple")).fit()
    assert grid[0].metrics["cwd"] == driver_dir
