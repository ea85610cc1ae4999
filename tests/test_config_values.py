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
import sys
from pathlib import Path
from typing import Any

import pytest

from actors import RunConfig, TuneConfig, Tuner, report
from actors._engine.trial import TrialSnapshot, TrialStatus
from actors.search import grid_search

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "benchmarks", "ray_oracle"))
from record_config_values import metric_rows, reported, seen, space  # (the recorder's space and report, run here)

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
