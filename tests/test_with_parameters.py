"""``with_parameters``: objects reach each machine once, never pickled into the trainable."""

from __future__ import annotations

import functools
import os
import posixpath
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

import actors as tune
from actors import RunConfig, Tuner
from actors._driver import parameters as P
from actors._driver.errors import ConfigError, TuneError
from actors._engine.trial import TrialStatus
from actors.search import grid_search
from storage import ExperimentLayout, StorageContext

MB = 2**20


def _private_bytes(pid: int) -> int:
    total = 0
    with open(f"/proc/{pid}/smaps_rollup", encoding="ascii") as handle:
        for line in handle:
            key, _, rest = line.partition(":")
            if key in ("Private_Clean", "Private_Dirty"):
                total += int(rest.split()[0]) * 1024
    return total


def train_sum(config: dict[str, Any], data: Any = None, scale: float = 1.0) -> None:
    import os

    tune.report({"total": float(data.sum()) * scale, "pid": os.getpid(),
                 "controller_private": _private_bytes(os.getppid()),
                 "read_only": not data.flags.writeable, "fetches": P.fetches})


class SumTrainable(tune.Trainable):
    def setup(self, config: dict[str, Any], data: Any = None) -> None:
        self.total = float(data.sum()) + config["add"]

    def step(self) -> dict[str, Any]:
        return {"total": self.total, "done": True}


_LEAN_DRIVER = """
import json, sys
import numpy as np
import actors as tune
from actors import RunConfig, TuneConfig, Tuner
from actors.search import grid_search
from tests.test_with_parameters import MB, train_sum

big = np.ones(8 * MB, dtype=np.float64)  # 64 MB
wrapped = tune.with_parameters(train_sum, data=big, scale=2.0)
tuner = Tuner(wrapped, param_space={"i": grid_search([0, 1, 2])}, tune_config=TuneConfig(max_concurrent_trials=1),
              run_config=RunConfig(name="wp", storage=sys.argv[1], verbose=0))
grid = tuner.fit()
print(json.dumps({"pickled": len(tuner._trainable), "name": tuner.trainable_name, "size": int(big.size),
                  "nbytes": int(big.nbytes), "metrics": [r.metrics for r in grid]}))
"""


def test_the_trainable_pickles_to_keys_and_the_controller_never_holds_the_data(storage_dir, no_leaks):
    """In a driver of its own: the controller is forked from the driver, so its private memory includes the
    driver's heap it inherited and the driver has since written to (in a test worker that imported torch, a
    controller held 424 MB that way), which would hide the 64 MB this is about."""
    import json
    import subprocess
    import sys

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")])))
    out = subprocess.run([sys.executable, "-c", _LEAN_DRIVER, storage_dir], capture_output=True, text=True,
                         timeout=300, cwd=root, env=env)
    assert out.returncode == 0, out.stderr[-3000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["pickled"] < 20_000  # keys only; functools.partial would carry all 64 MB
    assert got["name"] == "train_sum"  # Ray keeps the wrapped trainable's name
    assert [m["total"] for m in got["metrics"]] == [2.0 * got["size"]] * 3
    # the controller (each trial's parent process) holds far less than the array by itself
    assert max(m["controller_private"] for m in got["metrics"]) < got["nbytes"]
    assert len({m["pid"] for m in got["metrics"]}) == 1  # one reused actor ran all three


def test_a_class_trainable_gets_them_in_setup_and_keeps_its_name(storage_dir):
    data = np.arange(4.0)
    tuner = Tuner(tune.with_parameters(SumTrainable, data=data), param_space={"add": grid_search([0.0, 10.0])},
                  run_config=RunConfig(name="wpc", storage=storage_dir, verbose=0, system="simple"))
    assert tuner.trainable_name == "SumTrainable"
    grid = tuner.fit()
    assert sorted(r.metrics["total"] for r in grid) == [6.0, 16.0]
    assert all(r.status is TrialStatus.TERMINATED for r in grid)


def test_with_resources_is_kept_either_way_round():
    inner = tune.with_parameters(tune.with_resources(train_sum, {"cpu": 2}), data=1)
    outer = tune.with_resources(tune.with_parameters(train_sum, data=1), {"cpu": 2})
    assert inner._audition_resources == outer._audition_resources == {"cpu": 2.0}
    assert P.parameters_of(outer) and P.parameters_of(inner)
    cls = tune.with_resources(tune.with_parameters(SumTrainable, data=1), {"cpu": 2})
    assert P.parameters_of(cls) and cls._audition_resources == {"cpu": 2.0}


def test_anything_but_a_trainable_is_refused():
    with pytest.raises(ConfigError, match=r"function trainable or a subclass of actors\.Trainable"):
        tune.with_parameters(42, data=1)
    with pytest.raises(ConfigError, match=r"subclass of actors\.Trainable"):
        tune.with_parameters(dict, data=1)


def test_the_object_file_maps_arrays_read_only_without_a_copy(tmp_path):
    value = {"x": np.arange(1000.0), "label": "a", "n": [1, 2]}
    path = str(tmp_path / "obj")
    P.write_object(path, value, "test")
    back = P.read_object(path)
    assert back["label"] == "a" and back["n"] == [1, 2]
    assert np.array_equal(back["x"], value["x"])
    assert not back["x"].flags.writeable and not back["x"].flags.owndata  # a view of the mapping


class _Counting:
    def __init__(self) -> None:
        self.reads = 0

    def __call__(self, path: str) -> Any:
        self.reads += 1
        return _real_read(path)


_real_read = P.read_object


def _machine(tmp_path, monkeypatch, name: str) -> None:
    """Act as another machine: its own object area and an empty process cache."""
    monkeypatch.setenv(P.OBJECTS_DIR_ENV, str(tmp_path / name))
    monkeypatch.setattr(P, "_cache", {})


def test_another_machine_fetches_once_and_each_process_maps_once(tmp_path, monkeypatch):
    monkeypatch.setenv(P.OBJECTS_DIR_ENV, str(tmp_path / "driver-machine"))
    ctx = StorageContext(str(tmp_path / "storage"))
    layout = ExperimentLayout(ctx, "exp")
    params = P.Parameters({"data": np.arange(10.0)})
    published = P.publish([params], ctx, layout.experiment_dir, multi_host=True)
    key = params.keys["data"]
    remote = posixpath.join(layout.experiment_dir, P.STORAGE_DIR, key)
    assert os.path.exists(remote)
    monkeypatch.delitem(P._owned, key)  # not the driver's process: nothing inherited
    runner = SimpleNamespace(ctx=ctx, layout=layout)
    monkeypatch.setattr("actors._worker.session._process_session", runner)
    reads = _Counting()
    monkeypatch.setattr(P, "read_object", reads)
    monkeypatch.setattr(P, "fetches", 0)

    _machine(tmp_path, monkeypatch, "machine-b")
    first = params.resolve()["data"]
    again = params.resolve()["data"]  # the next trial of a reused actor
    assert again is first and reads.reads == 1 and P.fetches == 1
    monkeypatch.setattr(P, "_cache", {})  # a second trial process on machine b
    assert np.array_equal(params.resolve()["data"], np.arange(10.0))
    assert reads.reads == 2 and P.fetches == 1  # mapped again, not downloaded again

    P.unpublish(published)
    assert not os.path.exists(remote)
    _machine(tmp_path, monkeypatch, "machine-c")
    with pytest.raises(TuneError, match="neither on this machine nor at"):
        params.resolve()


def test_an_object_the_driver_cannot_pickle_is_named_before_anything_runs(tmp_path, monkeypatch):
    import threading

    monkeypatch.setenv(P.OBJECTS_DIR_ENV, str(tmp_path / "driver-machine"))
    ctx = StorageContext(str(tmp_path / "storage"))
    params = P.Parameters({"lock": threading.Lock()})
    with pytest.raises(ConfigError, match=r"with_parameters\(lock=...\) cannot be pickled"):
        P.publish([params], ctx, ExperimentLayout(ctx, "exp").experiment_dir, multi_host=True)
    assert os.listdir(P.objects_dir()) == []  # no half-written object file


def test_partial_is_what_it_replaces():
    """The documented stand-in pickled the data into the trainable (and so into every trial)."""
    big = np.ones(MB // 8)
    assert len(Tuner(functools.partial(train_sum, data=big))._trainable) > big.nbytes
    assert len(Tuner(tune.with_parameters(train_sum, data=big))._trainable) < big.nbytes // 10


def test_multi_host_workers_fetch_from_storage_once_per_machine(storage_dir, tmp_path, monkeypatch, no_leaks):
    from tests._cluster import Cluster, fit_in_thread, listening, wait_for

    monkeypatch.setenv(P.OBJECTS_DIR_ENV, str(tmp_path / "driver-machine"))
    cluster = Cluster("wp" + os.urandom(3).hex())
    data = np.arange(1000.0)
    tuner = Tuner(tune.with_parameters(train_sum, data=data), param_space={"i": grid_search([0, 1, 2, 3])},
                  run_config=RunConfig(name="wpmh", storage=storage_dir, verbose=0, leader_runs_trials=False,
                                       system=f"tcp://127.0.0.1:{cluster.port}"))
    out: dict = {}
    try:
        thread = fit_in_thread(tuner, out)
        wait_for(lambda: listening(cluster.port), 20, "the leader to listen")
        monkeypatch.setenv(P.OBJECTS_DIR_ENV, str(tmp_path / "other-machine"))  # the workers' machine
        cluster.start_worker("a")
        cluster.start_worker("b")
        thread.join(timeout=120)
        assert not thread.is_alive(), "fit() did not finish"
    finally:
        cluster.stop()
    assert "error" not in out, out.get("error")
    rows = [r.metrics for r in out["grid"]]
    assert [r["total"] for r in rows] == [data.sum()] * 4
    assert all(r["read_only"] for r in rows)  # mapped from the machine's file, not inherited
    per_process = {r["pid"]: r["fetches"] for r in rows}
    assert sum(per_process.values()) == 1, per_process  # one download for the machine
    cached = [f for f in os.listdir(tmp_path / "other-machine") if not f.endswith(".lock")]
    assert len(cached) == 1  # the machine keeps its copy (keyed by the object), no partial download
    assert not os.path.exists(os.path.join(storage_dir, "wpmh", P.STORAGE_DIR)) or not os.listdir(
        os.path.join(storage_dir, "wpmh", P.STORAGE_DIR))  # the storage copy is gone after fit()
    assert not [f for f in os.listdir(tmp_path / "driver-machine") if not f.endswith(".lock")]
