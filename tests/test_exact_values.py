"""Values JSON does not hold, kept as Ray Tune 2.60 keeps them (recorded by
``benchmarks/ray_oracle/record_exact_values.py`` into ``tests/data/ray_exact_values.json``).

Before: ``best_checkpoints`` gave each checkpoint's metrics as its manifest's JSON (a ``float32`` loss as a
float, an array or a set as a list), where Ray gives the reported values back; a restored config or result
kept ``numpy.float64``, an ``IntEnum`` or an ``OrderedDict`` as they were where Ray's JSON round trip makes them
a float, an int, a dict; and a ``param_space`` dict with int keys was refused ("param_space keys must be
strings") where Ray runs it.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from collections import OrderedDict
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from actors import Checkpoint, CheckpointConfig, RunConfig, TuneConfig, Tuner, report
from actors._state_codec import UnreadableValues, _as_json_shapes, load_metrics, pickled_exactly
from actors.search import SearchSpaceError, grid_search, uniform
from tests._json_values import json_values

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "benchmarks", "ray_oracle"))
from record_exact_values import (  # (the recorder's experiments, run here)
    SEARCHERS,
    Color,
    Name,
    checkpoint_rows,
    checkpointed,
    int_key_domain_result,
    int_key_result,
    int_key_rows,
    int_key_space,
    odd_rows,
    odd_values,
    restored_configs,
)
from record_exact_values import describe as _describe

with open(os.path.join(os.path.dirname(__file__), "data", "ray_exact_values.json")) as _f:
    RAY: dict[str, Any] = json.load(_f)

SYSTEMS = ["multiproc", "simple"]


class _Tune:
    grid_search = staticmethod(grid_search)


def _train_checkpointed(config: dict[str, Any]) -> None:
    for i in range(3):
        d = tempfile.mkdtemp()
        with open(os.path.join(d, "x"), "w") as f:
            f.write(str(i))
        report(checkpointed(i), checkpoint=Checkpoint.from_directory(d))


@pytest.mark.parametrize("system", SYSTEMS)
def test_best_checkpoints_hold_the_reported_values_as_rays(tmp_path: Path, system: str, no_leaks: Any) -> None:
    grid = Tuner(_train_checkpointed, tune_config=TuneConfig(metric="loss", mode="min"),
                 run_config=RunConfig(name="ck", storage_path=str(tmp_path), verbose=0, system=system,
                                      checkpoint_config=CheckpointConfig(num_to_keep=2,
                                                                         checkpoint_score_attribute="loss"))).fit()
    assert checkpoint_rows(grid) == RAY["checkpoints"]
    restored = Tuner.restore(str(tmp_path / "ck"), _train_checkpointed).get_results()
    assert checkpoint_rows(restored) == RAY["checkpoints_restored"]


def _train_odd(config: dict[str, Any]) -> None:
    report(dict(odd_values(), loss=1.0))


@pytest.mark.parametrize("system", SYSTEMS)
def test_restored_values_take_the_shapes_rays_json_gives_them(tmp_path: Path, system: str, no_leaks: Any) -> None:
    grid = Tuner(_train_odd, param_space={"c": odd_values()},
                 run_config=RunConfig(name="odd", storage_path=str(tmp_path), verbose=0, system=system)).fit()
    assert odd_rows(grid) == RAY["odd_fresh"]
    restored = Tuner.restore(str(tmp_path / "odd"), _train_odd).get_results()
    assert odd_rows(restored) == RAY["odd_restored"]


def _train_keys(config: dict[str, Any]) -> None:
    report(int_key_result(config))


@pytest.mark.parametrize("system", SYSTEMS)
def test_a_param_space_with_int_keys_runs_as_rays(tmp_path: Path, system: str, no_leaks: Any) -> None:
    grid = Tuner(_train_keys, param_space=int_key_space(_Tune), tune_config=TuneConfig(metric="loss", mode="min"),
                 run_config=RunConfig(name="keys", storage_path=str(tmp_path), verbose=0, system=system)).fit()
    assert int_key_rows(grid) == RAY["int_keys"]
    assert _describe(grid.get_best_result().config) == RAY["int_keys_best"]
    restored = Tuner.restore(str(tmp_path / "keys"), _train_keys).get_results()
    assert restored_configs(restored) == RAY["int_keys_restored"]


def test_a_key_json_cannot_hold_is_refused_naming_it() -> None:
    with pytest.raises(SearchSpaceError, match=r"at 'm': key \(1, 2\) \(tuple\) cannot be a param_space key; use a"):
        Tuner(_train_keys, param_space={"m": {(1, 2): 3}})


def test_metrics_that_no_longer_load_name_the_checkpoint() -> None:
    meta = {"metrics": {"loss": 1.0}, "metrics_pickled": "80"}  # (a truncated pickle)
    with pytest.raises(UnreadableValues, match=r"the metrics of checkpoint s3://b/c hold a value .* make the module"):
        load_metrics(meta, "s3://b/c")
    assert load_metrics({"metrics": {"loss": 1.0}}, "x") == {"loss": 1.0}


@given(st.dictionaries(st.text(max_size=3), json_values, max_size=4))
def test_metrics_json_gives_back_unchanged_carry_nothing_extra(values: dict[str, Any]) -> None:
    assert pickled_exactly(values) is None


@given(st.dictionaries(st.text(max_size=3), json_values, max_size=4),
       st.sampled_from([(1, 2), {1: "a"}, [(3,)]]))
def test_other_metrics_come_back_exactly(values: dict[str, Any], odd: Any) -> None:
    values = dict(values, odd=odd)
    text = pickled_exactly(values)
    assert text is not None
    back = load_metrics({"metrics": {}, "metrics_pickled": text}, "x")
    assert back == values and _describe(back) == _describe(values)


def _searcher(name: str) -> Any:
    from actors import search

    if name == "optuna":
        return search.OptunaSearch(seed=0)
    if name == "hyperopt":
        return search.HyperOptSearch(random_state_seed=0)
    if name == "bayesopt":
        return search.BayesOptSearch(random_state=0)
    if name == "nevergrad":
        import nevergrad as ng

        return search.NevergradSearch(optimizer=ng.optimizers.OnePlusOne)
    return search.ZOOptSearch(budget=10)


def _train_int_key_domain(config: dict[str, Any]) -> None:
    report(int_key_domain_result(config))


@pytest.mark.parametrize("name", SEARCHERS)
def test_every_searcher_fills_a_domain_under_an_int_key(tmp_path: Path, name: str, no_leaks: Any) -> None:
    """Ray 2.60's HyperOpt fills it; its other searchers raise TypeError (recorded). audition runs them all, and
    the trainable reads the value under the key it gave: a path-naming searcher's ``"w/0"`` suggestion comes
    back as ``{"w": {"0": ...}}`` and goes to the param_space's key ``0`` (before, BayesOpt's trials failed with
    ``KeyError: 0`` and Nevergrad raised ``TypeError``)."""
    grid = Tuner(_train_int_key_domain, param_space={"w": {0: uniform(0, 1), 1: 3}},
                 tune_config=TuneConfig(metric="loss", mode="min", num_samples=2, search_alg=_searcher(name)),
                 run_config=RunConfig(storage_path=str(tmp_path), verbose=0, system="simple")).fit()
    assert [r.error for r in grid] == [None, None]
    keys = [[type(k).__name__ for k in r.config["w"]] for r in grid]
    assert keys == RAY["int_key_searchers"][name] or RAY["int_key_searchers"][name] == "TypeError"
    assert keys == [["int", "int"], ["int", "int"]]
    for r in grid:
        assert r.config["w"][1] == 3 and isinstance(r.config["w"][0], float) and 0 <= r.config["w"][0] <= 1


_shaped_leaves = (st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=3)
                  | st.sampled_from([Color.RED, Name("n")]) | st.floats(allow_nan=False).map(np.float64))
_shaped = st.recursive(
    _shaped_leaves,
    lambda inner: (st.lists(inner, max_size=3) | st.lists(inner, max_size=3).map(tuple)
                   | st.dictionaries(st.text(max_size=2) | st.integers() | st.booleans() | st.none()
                                     | st.floats(allow_nan=False), inner, max_size=3)
                   | st.dictionaries(st.text(max_size=2), inner, max_size=3).map(OrderedDict)),
    max_leaves=8)


@given(_shaped)
def test_restored_shapes_are_a_json_round_trip(value: Any) -> None:
    """What JSON holds comes back as Ray's JSON state gives it: Python's json round trip, type for type."""
    back = json.loads(json.dumps(value))
    assert _describe(_as_json_shapes(value)) == _describe(back)
