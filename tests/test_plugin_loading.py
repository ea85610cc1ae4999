"""Scheduler plugins from outside the package: by import path, by entry point, and their errors.

The plugin is ``tests/plugin_pkg`` (``audition_myplugin.MyScheduler``), a package laid
out as a user would publish it.  It is made importable the way a user's environment
would: its directory goes on ``sys.path`` (inherited by the forked actor processes)
and on ``PYTHONPATH`` (seen by any freshly started interpreter).  Installing it with
pip would be slow, so the entry point is published by a ``*.dist-info`` directory
written into a temporary ``sys.path`` entry, which ``importlib.metadata`` finds
exactly like an installed distribution's.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import cloudpickle
import pytest

from actors import RunConfig, TuneConfig, Tuner
from actors._driver.errors import ConfigError
from actors._driver.plugins import ENTRY_POINT_GROUP, load_scheduler
from actors._engine.trial import TrialStatus
from actors.search import grid_search
from tests import _trainables as T

PLUGIN_DIR = Path(__file__).parent / "plugin_pkg"
ENTRY_POINTS = tomllib.loads((PLUGIN_DIR / "pyproject.toml").read_text())["project"]["entry-points"]


@pytest.fixture
def plugin_importable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(PLUGIN_DIR))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(PLUGIN_DIR),
                                                                   os.environ.get("PYTHONPATH")])))


def _publish(site: Path, group_entries: dict[str, dict[str, str]], dist: str = "audition_myplugin-0.1.0") -> None:
    """Write the metadata pip would install for a distribution declaring ``group_entries``."""
    info = site / f"{dist}.dist-info"
    info.mkdir(parents=True)
    name, _, version = dist.partition("-")
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    lines = []
    for group, entries in group_entries.items():
        lines.append(f"[{group}]")
        lines += [f"{key} = {value}" for key, value in entries.items()]
    (info / "entry_points.txt").write_text("\n".join(lines) + "\n")


@pytest.fixture
def entry_point_installed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, plugin_importable: None) -> None:
    """The plugin as ``pip install`` would leave it: importable, entry points from its pyproject."""
    site = tmp_path / "site"
    _publish(site, ENTRY_POINTS)
    monkeypatch.syspath_prepend(str(site))


def _fit(scheduler: Any, storage_dir: str, **space: Any) -> Any:
    space = space or {"x": grid_search([1.0, 2.0, 3.0, 4.0]), "steps": 4}
    return Tuner(
        T.fn_trainable,
        param_space=space,
        tune_config=TuneConfig(metric="loss", mode="min", scheduler=scheduler),
        run_config=RunConfig(name="plugin", storage=storage_dir, verbose=0),  # multi-process system
    ).fit()


def _check_laggards_stopped(grid: Any) -> None:
    """MyScheduler(at=2) on loss = x / step: x=3 and x=4 trail x=1 at iteration 2 whatever the order."""
    assert grid.num_errors == 0
    by_x = {r.config["x"]: r for r in grid}
    assert all(r.status is TrialStatus.TERMINATED for r in grid)
    assert by_x[1.0].metrics["training_iteration"] == 4
    assert by_x[3.0].metrics["training_iteration"] == 2
    assert by_x[4.0].metrics["training_iteration"] == 2


# ---------------------------------------------------------------------------- by import path

def test_import_path_string_runs_in_the_multiprocess_system(plugin_importable, storage_dir, no_leaks):
    from audition_myplugin import MyScheduler

    assert isinstance(load_scheduler("audition_myplugin:MyScheduler"), MyScheduler)
    assert isinstance(load_scheduler("audition_myplugin.MyScheduler"), MyScheduler)
    _check_laggards_stopped(_fit("audition_myplugin:MyScheduler", storage_dir))


def test_the_pickled_plugin_loads_in_a_fresh_interpreter(plugin_importable):
    """The scheduler travels by reference (module + class name): any process that can import
    the plugin can rebuild it, not only the forked ones that inherited the driver's modules."""
    blob = cloudpickle.dumps(load_scheduler("audition_myplugin:MyScheduler"))
    assert b"audition_myplugin" in blob
    code = ("import sys, cloudpickle; s = cloudpickle.loads(sys.stdin.buffer.read()); "
            "print(type(s).__module__, type(s).__name__, s.at)")
    out = subprocess.run([sys.executable, "-c", code], input=blob, capture_output=True, timeout=60,
                         env=dict(os.environ), cwd=str(PLUGIN_DIR.parent.parent), check=True)
    assert out.stdout.decode().split() == ["audition_myplugin", "MyScheduler", "2"]


# ---------------------------------------------------------------------------- by entry point

def test_pyproject_declares_the_entry_point() -> None:
    assert ENTRY_POINTS == {ENTRY_POINT_GROUP: {"myplugin": "audition_myplugin:MyScheduler"}}


def test_entry_point_name_loads_the_plugin(entry_point_installed):
    from audition_myplugin import MyScheduler

    sched = load_scheduler("myplugin")
    assert isinstance(sched, MyScheduler) and sched.at == 2


def test_entry_point_name_in_fit(entry_point_installed, storage_dir, no_leaks):
    _check_laggards_stopped(_fit("myplugin", storage_dir))


def test_entry_point_that_fails_to_import_is_a_clear_error(tmp_path, monkeypatch):
    _publish(tmp_path, {ENTRY_POINT_GROUP: {"broken": "no_such_module_xyz:Sched"}}, "broken_plugin-1.0")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ConfigError, match=r"entry point 'broken' \(no_such_module_xyz:Sched\) failed to load"):
        load_scheduler("broken")
    with pytest.raises(ConfigError, match="entry point 'broken'"):
        Tuner(T.fn_trainable, tune_config=TuneConfig(scheduler="broken"),
              run_config=RunConfig(storage=str(tmp_path / "results")))


# ---------------------------------------------------------------------------- errors

@pytest.mark.parametrize(("spec", "message"), [
    ("not_a_plugin", "neither an installed 'audition.schedulers' entry point nor an import path"),
    ("no_such_module_xyz:Sched", "could not be imported: No module named 'no_such_module_xyz'"),
    ("audition_myplugin:Missing", "could not be imported: .*has no attribute 'Missing'"),
    ("audition_myplugin:__doc__", "does not name a Scheduler subclass or factory"),
])
def test_bad_names_are_clear_config_errors(plugin_importable, spec, message):
    with pytest.raises(ConfigError, match=message):
        load_scheduler(spec)


def test_a_non_scheduler_object_is_refused():
    with pytest.raises(ConfigError, match=r"scheduler must be an actors\.schedulers\.Scheduler"):
        load_scheduler(42)


@pytest.mark.parametrize("spec", ["os.path:join", "actors.schedulers:PopulationBasedTraining"])
def test_a_name_that_cannot_be_built_without_arguments_is_a_config_error(spec):
    with pytest.raises(ConfigError, match=f"scheduler '{spec}' could not be created without arguments"):
        load_scheduler(spec)


def test_docs_show_the_plugin_files_as_they_are() -> None:
    """docs/schedulers.md quotes the plugin, its pyproject and its test: they must not drift."""
    docs = (PLUGIN_DIR.parent.parent / "docs" / "schedulers.md").read_text()
    quoted = re.findall(r"\*\*`(tests/plugin_pkg/[^`]+)`\*\*\n\n```\w+\n(.*?)```", docs, flags=re.DOTALL)
    assert {path for path, _ in quoted} == {
        "tests/plugin_pkg/audition_myplugin/__init__.py", "tests/plugin_pkg/pyproject.toml",
        "tests/plugin_pkg/test_audition_myplugin.py"}
    for path, text in quoted:
        assert text == (PLUGIN_DIR.parent.parent / path).read_text(), f"{path} differs from docs/schedulers.md"
