"""PB2 as Ray Tune 2.60's: the same explore step for the same history and numpy stream, the same fill, errors.

Recorded from Ray 2.60 (scikit-learn 1.9.1, scipy 1.17.1, numpy 2.4.6): ``ray.tune.schedulers.pb2._explore``
on the histories ``_history`` builds (as a pandas frame, in the same row order) after ``numpy.random.seed(s)``,
and a ``Tuner`` run's filled configs (``ray.init()``, then ``random.seed(3)``, ``numpy.random.seed(3)``). No test
imports Ray.
"""

from __future__ import annotations

import math
import random
import warnings
from typing import Any

import pytest

from actors import RunConfig, TuneConfig, Tuner, report
from actors import search as tune
from actors.schedulers import create_scheduler
from actors.schedulers._pb2_gp import explore
from actors.schedulers.pb2 import PB2
from tests._lean import lazy, needs
from tests.test_pbt_fill import _Seen  # (a callback noting evaluated_params and tags)

pytestmark = needs("sklearn", "scipy")  # (imported by the tests, not at collection: tests/_lean.py)
np = lazy("numpy")  # (an extra's dependency, not audition's: the module imports without it, to skip)


def _history(n_trials: int, steps: int, int_mom: bool = False, shuffled: bool = False) -> list[Any]:
    """A population's scores at its perturbation points: ties in time, and some trials' lr changed at step 4;
    ``shuffled``: in another order (results arrive out of time order), so the sorts' ties matter."""
    rows = []
    for k in range(1, steps + 1):
        for j in range(n_trials):
            lr = 0.01 * (j + 1) if (k < 4 or j % 2) else 0.02 * (j + 1)
            mom = (j + 2) if int_mom else 0.5 + 0.1 * j
            reward = (j + 1) * math.log(1 + k) - 30 * (lr - 0.025) ** 2 + 0.01 * k * mom
            rows.append((f"trial_{j}", 10 * k, (lr, mom), reward))
    return [rows[(i * 7) % len(rows)] for i in range(len(rows))] if shuffled else rows


# name: (n_trials, steps, base, old, config, current, seed, int_mom, shuffled) -> Ray's (new config, its value
# types, rows in the history after, the row added, numpy's next random() after)
CASES: dict[str, tuple[Any, ...]] = {
    "small": (4, 6, "trial_3", "trial_0", {"lr": 0.04, "mom": 0.8, "other": "x"}, None, 0, False, False),
    "seed7": (4, 6, "trial_2", "trial_1", {"lr": 0.06, "mom": 0.7}, None, 7, False, False),
    "current2": (4, 6, "trial_3", "trial_0", {"lr": 0.04, "mom": 0.8},
                 [[0.05533253774046898, 0.7365185618400574]], 0, False, False),
    "current3": (4, 6, "trial_3", "trial_0", {"lr": 0.04, "mom": 0.8},
                 [[0.05533253774046898, 0.7365185618400574], [0.03, 0.3]], 1, False, False),
    "no_change": (4, 1, "trial_3", "trial_0", {"lr": 0.04, "mom": 0.8}, None, 0, False, False),
    "int": (4, 6, "trial_3", "trial_0", {"lr": 0.04, "mom": 5}, None, 0, True, False),
    "long": (8, 30, "trial_7", "trial_0", {"lr": 0.08, "mom": 1.2}, None, 3, False, False),  # >= 200 rows: by CV
    "shuffled": (4, 6, "trial_3", "trial_0", {"lr": 0.04, "mom": 0.8}, None, 2, False, True),
    "shuffled_long": (5, 8, "trial_4", "trial_1", {"lr": 0.04, "mom": 0.8}, None, 5, False, True),
    # >= 200 rows out of order: which tied rows the history's latest 200, 210, ... hold is the sorts' doing
    "shuffled_cv": (8, 31, "trial_5", "trial_2", {"lr": 0.04, "mom": 0.8}, None, 4, False, True),
    "shuffled_cv2": (9, 25, "trial_8", "trial_0", {"lr": 0.04, "mom": 0.8}, None, 6, False, True),
}
RAY: dict[str, tuple[Any, ...]] = {
    "small": ({"lr": 0.05533253774046898, "mom": 0.7365185618400574, "other": "x"},
              {"lr": "float", "mom": "float", "other": "str"}, 25,
              ["trial_0", 60.0, 0.05533253774046898, 0.7365185618400574, 7.824890596221253], 0.978618342232764),
    "seed7": ({"lr": 0.008554521016776562, "mom": 0.7941277027130127}, {"lr": "float", "mom": "float"}, 25,
              ["trial_1", 60.0, 0.008554521016776562, 0.7941277027130127, 5.84298044716594], 0.6005489174641225),
    "current2": ({"lr": 0.057437166571617126, "mom": 0.7270583510398865}, {"lr": "float", "mom": "float"}, 25,
                 ["trial_0", 60.0, 0.057437166571617126, 0.7270583510398865, 7.824890596221253], 0.978618342232764),
    "current3": ({"lr": 0.04228517785668373, "mom": 0.7410888075828552}, {"lr": "float", "mom": "float"}, 25,
                 ["trial_0", 60.0, 0.04228517785668373, 0.7410888075828552, 7.824890596221253], 0.8007445686755367),
    "no_change": ({"lr": 0.04, "mom": 0.8}, {"lr": "float", "mom": "float"}, 4,
                  ["trial_3", 10.0, 0.04, 0.8, 2.7738387222397813], 0.5488135039273248),
    "int": ({"lr": 0.05533253774046898, "mom": 6}, {"lr": "float", "mom": "int"}, 25,
            ["trial_0", 60.0, 0.05533253774046898, 6.0, 8.076890596221252], 0.978618342232764),
    "long": ({"lr": 0.013432946056127548, "mom": 0.2844461500644684}, {"lr": "float", "mom": "float"}, 241,
             ["trial_0", 300.0, 0.013432946056127548, 0.2844461500644684, 27.74114763588117], 0.28352508177131874),
    "shuffled": ({"lr": 0.04416349530220032, "mom": 0.12307434529066086}, {"lr": "float", "mom": "float"}, 25,
                 ["trial_0", 60.0, 0.04416349530220032, 0.12307434529066086, 7.824890596221253], 0.505246090121704),
    "shuffled_long": ({"lr": 0.022977324202656746, "mom": 0.8749517798423767}, {"lr": "float", "mom": "float"}, 41,
                      ["trial_1", 80.0, 0.022977324202656746, 0.8749517798423767, 10.889372886681098],
                      0.5999291966249876),
    "shuffled_cv": ({"lr": 0.08961547166109085, "mom": 0.2709399163722992}, {"lr": "float", "mom": "float"}, 249,
                    ["trial_2", 310.0, 0.08961547166109085, 0.2709399163722992, 21.067665416798356],
                    0.43614664687979765),
    "shuffled_cv2": ({"lr": 0.08230168372392654, "mom": 0.13710999488830566}, {"lr": "float", "mom": "float"}, 226,
                     ["trial_0", 250.0, 0.08230168372392654, 0.13710999488830566, 28.92711884219334],
                     0.054474507822354634),
}


def _close(got: Any, want: Any) -> bool:
    """Equal, numbers to 1e-3 relative: the GP's fit and the UCB's maximisation run L-BFGS-B over BLAS, whose
    rounding depends on the CPU (as for BayesOptSearch: tests/test_bayesopt_search.py)."""
    if isinstance(want, dict):
        return isinstance(got, dict) and list(got) == list(want) and all(_close(got[k], want[k]) for k in want)
    if isinstance(want, (list, tuple)):
        return len(got) == len(want) and all(map(_close, got, want))
    if isinstance(want, float):
        return isinstance(got, float) and math.isclose(got, want, rel_tol=1e-3, abs_tol=1e-6)
    return bool(got == want)


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.slow
def test_the_explore_step_chooses_what_rays_chooses(name: str) -> None:
    n_trials, steps, base, old, config, current, seed, int_mom, shuffled = CASES[name]
    bounds = [(0.001, 0.1), (1, 9) if int_mom else (0.1, 0.99)]
    rng = np.random.RandomState(seed)  # (numpy.random.seed(seed): Ray's global stream)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # scikit-learn's ConvergenceWarnings, as under Ray
        new, rows = explore(_history(n_trials, steps, int_mom, shuffled), ["lr", "mom"], bounds,
                            None if current is None else np.array(current), base, old, dict(config), rng)
    want_config, want_types, want_rows, want_last, want_next = RAY[name]
    assert _close(new, want_config)
    assert {k: type(v).__name__ for k, v in new.items()} == want_types
    last = rows[-1]
    assert len(rows) == want_rows
    assert _close([last[0], float(last[1]), *map(float, last[2]), float(last[3])], want_last)
    assert rng.random_sample() == want_next  # as many draws as Ray's (10 starts x the dimensions, or none)


RAY_FILL = [  # (config, evaluated_params, experiment_tag) by trial
    ({"x": 1, "u": 0.5507979025745755, "nest": {"c": 0.5, "b": 5.5108276051976635}, "g": 1,
      "lr": 0.02916138341740314},
     {"u": 0.5507979025745755, "g": 1, "lr": 0.02916138341740314, "nest/b": 5.5108276051976635}, "0_g=1,u=0.5508"),
    ({"x": 1, "u": 0.7081478226181048, "nest": {"c": 0.5, "b": 5.896293088933438}, "g": 2,
      "lr": 0.08930540073933071},
     {"u": 0.7081478226181048, "g": 2, "lr": 0.08930540073933071, "nest/b": 5.896293088933438}, "1_g=2,u=0.7081"),
    ({"x": 1, "u": 0.12558531046383625, "nest": {"c": 0.5, "b": 5.440809843650636}, "g": 1,
      "lr": 0.0052415736097529055},
     {"u": 0.12558531046383625, "g": 1, "lr": 0.0052415736097529055, "nest/b": 5.440809843650636},
     "2_g=1,u=0.1256"),
    ({"x": 1, "u": 0.20724287813818676, "nest": {"c": 0.5, "b": 5.456833224394711}, "g": 2,
      "lr": 0.0030846334667688387},
     {"u": 0.20724287813818676, "g": 2, "lr": 0.0030846334667688387, "nest/b": 5.456833224394711},
     "3_g=2,u=0.2072"),
]
RAY_FILL_NUMPY_AFTER = 0.6491440476147607


def _report_once(config: dict[str, Any]) -> None:
    report({"loss": config["lr"]})


def test_bounded_keys_a_config_lacks_are_filled_as_ray_fills_them(tmp_path: Any) -> None:
    seen = _Seen()
    random.seed(3)
    np.random.seed(3)
    pb2 = PB2(time_attr="training_iteration", perturbation_interval=100, metric="loss", mode="min",
              hyperparam_bounds={"lr": [1e-4, 1e-1], "nest": {"b": [5, 6], "c": [0, 1]}, "x": [7, 8]})
    space = {"x": 1, "u": tune.uniform(0, 1), "nest": {"c": 0.5}, "g": tune.grid_search([1, 2])}
    grid = Tuner(_report_once, param_space=space, tune_config=TuneConfig(scheduler=pb2, num_samples=2),
                 run_config=RunConfig(storage=str(tmp_path), name="fill", verbose=0, callbacks=[seen],
                                      system="simple")).fit()
    got = []
    for r in sorted(grid, key=lambda r: r.metrics["trial_id"]):
        params, tag = seen.seen[r.metrics["trial_id"]]
        assert list(r.config) == list(RAY_FILL[0][0]) and list(r.config["nest"]) == ["c", "b"]
        assert list(params) == list(RAY_FILL[0][1])
        got.append((r.config, params, tag))
    assert got == RAY_FILL
    assert np.random.random() == RAY_FILL_NUMPY_AFTER


def _curve(config: dict[str, Any], i: int) -> dict[str, Any]:
    return {"reward": i * (1.0 - abs(config["lr"] - 0.03) * 10) + config["nest"]["m"]}


def _simulated(seed: int) -> Any:
    from actors.testing import simulate

    pb2 = PB2(time_attr="training_iteration", perturbation_interval=3, seed=seed,
              hyperparam_bounds={"lr": [0.001, 0.1], "nest": {"m": [0.0, 1.0]}})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return simulate(_curve, {"lr": tune.uniform(0.001, 0.1), "nest": {"m": tune.uniform(0, 1)}},
                        TuneConfig(metric="reward", mode="max", num_samples=6, scheduler=pb2),
                        max_iterations=15, seed=seed, cpus=3)


def test_a_whole_experiment_exploits_with_bayesian_choices_inside_the_bounds() -> None:
    sim = _simulated(4)
    assert not sim.hung and sim.results is not None and len(sim.results) == 6
    exploits = [h["pbt_exploit"] for r in sim.results for h in r.metrics_history if "pbt_exploit" in h]
    assert exploits, "no trial was cloned"
    for info in exploits:
        new = info["new_config"]
        assert 0.001 <= new["lr"] <= 0.1 and 0.0 <= new["nest"]["m"] <= 1.0
        assert type(new["lr"]) is float  # the source's type, from float32 (as Ray)
        assert new["lr"] == float(np.float32(new["lr"]))
        assert (new["lr"], new["nest"]["m"]) != (info["source_config"]["lr"], info["source_config"]["nest"]["m"])
    tags = [r.metrics["experiment_tag"] for r in sim.results if "@perturbed" in r.metrics["experiment_tag"]]
    assert tags and all("lr=" in t and "nest=" in t for t in tags)
    again = _simulated(4)  # the seed fixes every choice
    assert [r.metrics_history for r in again.results] == [r.metrics_history for r in sim.results]
    sim.discard()
    again.discard()


def test_its_state_round_trips() -> None:
    import cloudpickle

    pb2 = PB2(metric="loss", mode="min", hyperparam_bounds={"lr": [0.001, 0.1]}, seed=1)
    pb2._rows = [("a", 1.0, (0.01,), -1.0)]
    pb2._np_rng.random_sample()
    other = PB2(metric="loss", mode="min", hyperparam_bounds={"lr": [0.001, 0.1]}, seed=1)
    other.restore(cloudpickle.loads(cloudpickle.dumps(pb2.save())))
    assert other._rows == pb2._rows and other._np_rng.random_sample() == pb2._np_rng.random_sample()


def test_bad_bounds_are_refused_as_ray_refuses_them() -> None:
    with pytest.raises(ValueError, match="`hyperparam_bounds` must be specified"):
        PB2(metric="loss", mode="min")
    with pytest.raises(ValueError, match=r"list or tuple of size 2, but got \[1, 2, 3\] instead for the param 'a/b'"):
        PB2(hyperparam_bounds={"a": {"b": [1, 2, 3]}})
    with pytest.raises(ValueError, match=r"where low <= high, but got \[2, 1\] instead for param 'lr'"):
        PB2(hyperparam_bounds={"lr": [2, 1]})


def test_create_scheduler_builds_it() -> None:
    made = create_scheduler("pb2", metric="loss", mode="min", hyperparam_bounds={"lr": [0.001, 0.1]})
    assert type(made) is PB2 and made.hyperparam_bounds == {"lr": [0.001, 0.1]}


def test_a_config_without_a_bounded_key_is_a_clear_error() -> None:
    from actors._engine.trial import TrialSnapshot, TrialStatus

    pb2 = PB2(time_attr="training_iteration", metric="loss", mode="min", hyperparam_bounds={"lr": [0.001, 0.1]})
    trial = TrialSnapshot("t1", {"x": 1}, TrialStatus.RUNNING)
    with pytest.raises(ValueError, match=r"PB2: trial t1's config has no 'lr', which hyperparam_bounds names"):
        pb2._scored(trial, {"training_iteration": 1, "loss": 1.0}, -1.0)
