"""Functions as config values, as Ray Tune 2.60 passes them (recorded by
``benchmarks/ray_oracle/record_config_values.py`` into ``tests/data/ray_config_values.json``).

A lambda or a local function in a ``param_space`` is a value like any other: the trainable gets the function
and calls it. Thespian pickles every message with plain ``pickle``, which refuses such a function: the
send was declared poison and the run hung until the driver gave up ("the controller sent nothing for
60s"). Now a message plain pickle refuses goes by cloudpickle (``actors._driver.system._ByValueWhenNeeded``),
and ``report()`` refuses only a value cloudpickle refuses too (a lambda as a metric is Ray's too).
"""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from actors import RunConfig, TuneConfig, Tuner, report
from actors._engine.trial import TrialSnapshot, TrialStatus
from actors.search import grid_search
from tests._json_values import json_values

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "benchmarks", "ray_oracle"))
from record_config_values import (  # (the recorder's space and report, run here)
    fails_once,
    metric_rows,
    metric_types,
    odd_metrics,
    odd_space,
    reported,
    restored_rows,
    seen,
    space,
)

with open(os.path.join(os.path.dirname(__file__), "data", "ray_config_values.json")) as _f:
    RAY: dict[str, Any] = json.load(_f)


class _Tune:
    grid_search = staticmethod(grid_search)


def _train(config: dict[str, Any]) -> None:
    report(seen(config))


@pytest.mark.parametrize("system", ["multiproc", "simple"])
def test_functions_in_the_param_space_reach_the_trainable_as_rays(tmp_path: Path, system: str, no_leaks: Any) -> None:
    grid = Tuner(_train, param_space=space(_Tune), tune_config=TuneConfig(max_concurrent_trials=1),
                 run_config=RunConfig(storage_path=str(tmp_path), name="functions", system=system, verbose=0)).fit()
    rows = sorted(([{k: r.metrics[k] for k in ("f_type", "f", "g", "h_type", "h")},
                    type(r.config["g"]).__name__, r.error is not None] for r in grid), key=json.dumps)
    assert rows == RAY["trials"]


def _train_reporting(config: dict[str, Any]) -> None:
    report(reported(config))


@pytest.mark.parametrize("system", ["multiproc", "simple"])
def test_a_function_reported_as_a_metric_is_in_the_result_as_rays(tmp_path: Path, system: str, no_leaks: Any) -> None:
    """report() refused it ("cannot be pickled": its check used plain pickle); Ray keeps it, callable."""
    grid = Tuner(_train_reporting, run_config=RunConfig(storage_path=str(tmp_path), name="reported", system=system,
                                                        verbose=0)).fit()
    assert metric_rows(grid) == RAY["reported"]


def _train_once(config: dict[str, Any]) -> None:
    report(fails_once(config))


@pytest.mark.parametrize("system", ["multiproc", "simple"])
def test_a_restored_trial_gets_back_config_values_json_cannot_hold(tmp_path: Path, system: str,
                                                                   no_leaks: Any) -> None:
    """The state carries them cloudpickled beside the JSON view and ``Tuner.restore`` loads them (before: each
    was ``str(value)``, and the restored trial calling its function raised "'str' object is not callable")."""
    from storage import ExperimentLayout, StorageContext, read_experiment_state

    Tuner(_train_once, param_space=odd_space(_Tune, str(tmp_path / "flag")),
          tune_config=TuneConfig(max_concurrent_trials=1),
          run_config=RunConfig(storage_path=str(tmp_path), name="odd", system=system, verbose=0)).fit()
    ctx = StorageContext(str(tmp_path))
    state = read_experiment_state(ctx, ExperimentLayout(ctx, "odd"))
    assert state is not None
    row = state["trials"][0]  # readable by what unpickles nothing (as before), the exact values beside it
    assert row["config"]["f"].startswith("<function") and row["config"]["t"] == [1, 2] and row["config_pickled"]
    grid = Tuner.restore(str(tmp_path / "odd"), _train_once, resume_errored=True).fit()
    assert restored_rows(grid) == RAY["restored"]


def _train_odd(config: dict[str, Any]) -> None:
    report(odd_metrics(config))


def test_a_restored_experiments_results_keep_metric_values_json_cannot_hold(tmp_path: Path, no_leaks: Any) -> None:
    """``Tuner.restore(...).get_results()`` reads the saved state: its last results are Ray's as they were."""
    Tuner(_train_odd, run_config=RunConfig(storage_path=str(tmp_path), name="odd_metrics", verbose=0)).fit()
    assert metric_types(Tuner.restore(str(tmp_path / "odd_metrics"), _train_odd).get_results()) == \
        RAY["restored_metrics"]


def test_the_transport_pickles_plainly_and_by_value_only_when_it_must() -> None:
    from actors._driver.system import _ByValueWhenNeeded

    plain = TrialSnapshot("t1", {"lr": 0.1}, TrialStatus.RUNNING, {"loss": 1.0})
    assert _ByValueWhenNeeded.dumps(plain) == pickle.dumps(plain)  # every ordinary message: as before
    with pytest.raises((pickle.PicklingError, AttributeError)):
        pickle.dumps(TrialSnapshot("t2", {"f": lambda: 7}, TrialStatus.PENDING))
    back = pickle.loads(_ByValueWhenNeeded.dumps(TrialSnapshot("t2", {"f": lambda: 7}, TrialStatus.PENDING)))
    assert isinstance(back, TrialSnapshot) and back.config["f"]() == 7


def test_functions_in_the_param_space_reach_a_trial_on_another_member(cluster: Any, storage_dir: str,
                                                                      no_leaks: Any) -> None:
    """The same over Thespian's TCP transport to an ``audition worker`` (its own process, not forked from the
    driver: it installs the transport's pickler itself), the leader running no trials."""
    from tests._cluster import fit_in_thread, listening, wait_for

    tuner = Tuner(_train, param_space=space(_Tune), tune_config=TuneConfig(max_concurrent_trials=1),
                  run_config=RunConfig(name="functions", storage=storage_dir, system=f"tcp://127.0.0.1:{cluster.port}",
                                       leader_runs_trials=False, verbose=0))
    out: dict[str, Any] = {}
    thread = fit_in_thread(tuner, out)
    wait_for(lambda: listening(cluster.port), 20, "the leader to listen")
    cluster.start_worker("a", cpus=1)
    thread.join(timeout=90)
    assert not thread.is_alive() and "error" not in out, out.get("error")
    rows = sorted(([{k: r.metrics[k] for k in ("f_type", "f", "g", "h_type", "h")},
                    type(r.config["g"]).__name__, r.error is not None] for r in out["grid"]), key=json.dumps)
    assert rows == RAY["trials"]
    cluster.stop()


def _leader(port: int, storage: str) -> None:
    """Script mode: this process leads (no trials of its own) and starts one ``audition worker``, both taking
    the cluster key from the environment; prints the rows the tests compare."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    worker = subprocess.Popen([sys.executable, "-m", "actors._cli", "worker", "--leader", f"127.0.0.1:{port}",
                               "--cpus", "1", "--id", f"w-{uuid.uuid4().hex[:8]}"],
                              env=dict(os.environ, PYTHONPATH=root), stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    from tests import test_config_values as me  # (by reference, as the pytest tests: a worker imports it)

    try:
        grid = Tuner(me._train, param_space=me.space(me._Tune), tune_config=TuneConfig(max_concurrent_trials=1),
                     run_config=RunConfig(name="functions", storage=storage, verbose=0,
                                          system=f"tcp://127.0.0.1:{port}", leader_runs_trials=False)).fit()
        rows = sorted(([{k: r.metrics[k] for k in ("f_type", "f", "g", "h_type", "h")},
                        type(r.config["g"]).__name__, r.error is not None] for r in grid), key=json.dumps)
        print(json.dumps({"rows": rows, "auth": _authenticated()}), flush=True)
    finally:
        worker.terminate()
        worker.wait(30)


def _authenticated() -> bool:
    from actors._cluster.auth import current_auth

    return current_auth() is not None


def test_functions_in_the_param_space_cross_an_authenticated_cluster(tmp_path: Path, no_leaks: Any) -> None:
    """With a cluster key every frame is signed: the signing wraps the transport's pickler (installed first),
    so a config sent by cloudpickle is signed and checked like any other (a separate process: enabling
    authentication patches Thespian for the life of the process)."""
    from tests._ports import leader_port

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AUDITION_CLUSTER_KEY", "AUDITION_ALLOW"))}
    env.update(PYTHONPATH=root, AUDITION_CLUSTER_KEY=uuid.uuid4().hex * 2)
    done = subprocess.run([sys.executable, "-m", "tests.test_config_values", str(leader_port()), str(tmp_path)],
                          env=env, cwd=root, capture_output=True, text=True, timeout=100)
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out == {"rows": RAY["trials"], "auth": True}


if __name__ == "__main__":
    _leader(int(sys.argv[1]), sys.argv[2])


@given(st.dictionaries(st.text(max_size=4), json_values, max_size=5))
def test_values_json_holds_carry_nothing_extra(values: dict[str, Any]) -> None:
    from actors._state_codec import pickled

    assert pickled(values) is None


@given(st.dictionaries(st.text(max_size=4), json_values, max_size=4), st.text(max_size=4))
def test_other_values_ride_along_pickled_and_come_back_as_after_a_json_round_trip(values: dict[str, Any],
                                                                                  key: str) -> None:
    """A set comes back a set; a tuple a list (as Ray's restore gives it), also beside a value that is pickled."""
    from actors._state_codec import load_pickled, pickled

    odd = {**values, key: {"s": {1, 2}, "t": (3, 4)}}
    row = {"trial_id": "t", "config": json.loads(json.dumps(odd, default=str)), "config_pickled": pickled(odd)}
    state = json.loads(json.dumps({"trials": [row]}))
    load_pickled(state)
    assert state["trials"][0] == {"trial_id": "t", "config": {**values, key: {"s": {1, 2}, "t": [3, 4]}}}


def test_a_rows_exact_values_are_pickled_once_per_result_not_per_state_write(monkeypatch: pytest.MonkeyPatch) -> None:
    """A state writes every row each second: a trial whose last result holds a ``float32`` loss is pickled again
    only when a new result replaced it; one whose values JSON holds keeps nothing."""
    import numpy as np

    from actors._shell import experiment_io
    from actors._state_codec import pickled

    calls: list[Any] = []
    monkeypatch.setattr(experiment_io, "pickled", lambda values: calls.append(values) or pickled(values))
    io = object.__new__(experiment_io.ExperimentIO)
    io._exact = {}
    first, second = {"loss": np.float32(0.5)}, {"loss": np.float32(0.25)}
    assert io._exact_text("t", "last_result", first) == io._exact_text("t", "last_result", first) is not None
    assert len(calls) == 1
    assert io._exact_text("t", "last_result", second) != io._exact_text("t", "last_result", first)
    assert io._exact_text("t", "last_result", {"loss": 0.5}) is None and io._exact == {}
