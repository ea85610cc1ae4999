"""Ray Tune 2.60's ``experiment_tag`` and ``evaluated_params`` for spaces with ``sample_from``,
domains inside lists and dict-valued grids and choices.

Recorded from Ray 2.60 (``/work/rayvenv``): a function trainable reporting ``{"v": 1}``, each space
below as ``param_space`` (default generator, ``num_samples=1``), ``Result.metrics["experiment_tag"]``
and a callback's ``trial.evaluated_params`` in ``on_trial_start``. Ray never lists a ``sample_from``
value, names a value inside a list by its index, sorts the tag by path (``2`` before ``10``) and
orders ``evaluated_params`` as drawn domains first, then grids sorted by path.
"""

from __future__ import annotations

from typing import Any

import pytest

import actors as tune
from actors import Callback, RunConfig, TuneConfig, Tuner


class _Params(Callback):
    def __init__(self) -> None:
        self.seen: list[dict[str, Any]] = []

    def on_trial_start(self, iteration: int, trials: Any, trial: Any, **info: Any) -> None:
        self.seen.append(dict(trial.evaluated_params))


def _train(config: dict[str, Any]) -> None:
    tune.report({"v": 1})


CASES: dict[str, tuple[Any, list[str], list[dict[str, Any]]]] = {
    "fn_only": ({"f": tune.sample_from(lambda spec: 2)}, ["0"], [{}]),
    "indep_fn": ({"f": tune.sample_from(lambda spec: 7), "g": tune.grid_search([1])}, ["0_g=1"], [{"g": 1}]),
    "dep_fn": ({"f": tune.sample_from(lambda spec: spec.config.u * 2), "u": tune.choice([3])}, ["0_u=3"],
               [{"u": 3}]),
    "dict_choice": ({"c": tune.choice([{"x": 1, "y": {"z": 2}}]), "g": tune.grid_search([1])},
                    ["0_c=x_1_y_z_2,g=1"], [{"c": {"x": 1, "y": {"z": 2}}, "g": 1}]),
    "long_list": ({"l": [0] * 10 + [tune.grid_search([7]), tune.choice([8])],
                   "b": [tune.choice([9]), tune.grid_search([{"k": 1}])]},
                  ["0_0=9,1=k_1,10=7,11=8"], [{"l/11": 8, "b/0": 9, "b/1": {"k": 1}, "l/10": 7}]),
    "grid_dict": ({"g": tune.grid_search([{"a": 1}, {"a": 2}])}, ["0_g=a_1", "1_g=a_2"],
                  [{"g": {"a": 1}}, {"g": {"a": 2}}]),
    "index_order": ({"l": [0, 0, tune.choice([5])] + [0] * 7 + [tune.grid_search([6]), tune.grid_search([1])],
                     "m": [tune.grid_search([3])] * 3},
                    ["0_2=5,10=6,11=1,0=3,1=3,2=3"], [{"l/2": 5, "l/10": 6, "l/11": 1, "m/0": 3, "m/1": 3, "m/2": 3}]),
    "fn_in_list": ({"l": [tune.sample_from(lambda s: 3), tune.choice([4])]}, ["0_1=4"], [{"l/1": 4}]),
}


@pytest.mark.parametrize("name", list(CASES))
def test_tags_and_evaluated_params_are_rays(name: str, storage_dir: str) -> None:
    space, tags, params = CASES[name]
    seen = _Params()
    grid = Tuner(_train, param_space=space, tune_config=TuneConfig(max_concurrent_trials=1),
                 run_config=RunConfig(name=name, storage=storage_dir, verbose=0, callbacks=[seen],
                                      system="simple")).fit()
    assert [r.metrics["experiment_tag"] for r in grid] == tags
    assert seen.seen == params
    assert [list(p) for p in seen.seen] == [list(p) for p in params]  # Ray's order too


def test_params_json_keys_sorted_as_rays(storage_dir: str) -> None:
    # recorded from Ray 2.60: params.json is json.dump(config, indent=2, sort_keys=True)
    import json
    import os

    grid = Tuner(_train, param_space={"b": {"d": 1, "c": [{"z": 1, "y": 2}]}, "a": 0},
                 run_config=RunConfig(name="params", storage=storage_dir, verbose=0, system="simple")).fit()
    with open(os.path.join(grid[0].path, "params.json")) as handle:
        text = handle.read()
    assert text == json.dumps({"a": 0, "b": {"c": [{"y": 2, "z": 1}], "d": 1}}, indent=2)
