"""OptunaSearch's warm start and study options as Ray 2.60's: ``evaluated_rewards``, ``storage``, a
sampler beside a seed, Ray's argument order.

The suggestions below were recorded from Ray 2.60's ``OptunaSearch`` (optuna 5.1.0) by the same
driving loop (``_drive``), with ``ray.tune.uniform``/``choice`` for the space; no test imports Ray.
"""

from __future__ import annotations

import logging
import pickle
from typing import Any

import pytest

from actors.search import OptunaSearch, Searcher, choice, uniform

optuna = pytest.importorskip("optuna")
optuna.logging.set_verbosity(optuna.logging.WARNING)

SPACE: dict[str, Any] = {"x": uniform(-5, 5), "y": choice(["a", "b", "c"])}
# ten points evaluated elsewhere, with their rewards: more than TPE's 10 random start-up trials
POINTS = [{"x": 1.0 + 0.1 * k, "y": "a"} for k in range(10)]
REWARDS = [0.01 * k * k for k in range(10)]


def _drive(searcher: Searcher, n: int, first: int = 0) -> list[list[Any]]:
    out = []
    for i in range(first, first + n):
        cfg = searcher.suggest(f"t{i}")
        assert isinstance(cfg, dict)
        loss = (cfg["x"] - 1) ** 2 + {"a": 0, "b": 1, "c": 2}[cfg["y"]]
        searcher.on_trial_complete(f"t{i}", {"loss": loss})
        out.append([round(cfg["x"], 4), cfg["y"]])
    return out


def test_evaluated_rewards_are_told_to_the_study_and_never_run_as_in_ray() -> None:
    searcher = OptunaSearch(SPACE, metric="loss", mode="min", seed=0, points_to_evaluate=POINTS,
                            evaluated_rewards=REWARDS)
    # recorded from Ray 2.60: TPE already models the ten points, so no point is suggested again
    assert _drive(searcher, 4) == [[-2.5971, "a"], [-1.2747, "b"], [4.8952, "b"], [4.1716, "c"]]
    told = searcher.study.trials[:10]
    assert [t.state.name for t in told] == ["COMPLETE"] * 10
    assert [t.value for t in told] == REWARDS
    assert [t.params["x"] for t in told] == [p["x"] for p in POINTS]
    maximizing = OptunaSearch(SPACE, metric="loss", mode="max", seed=0, points_to_evaluate=POINTS,
                              evaluated_rewards=REWARDS)
    assert _drive(maximizing, 3) == [[4.8859, "a"], [4.5278, "c"], [4.625, "c"]]  # recorded too


def test_evaluated_rewards_with_the_space_from_the_tuner() -> None:
    searcher = OptunaSearch(metric="loss", mode="min", seed=0, points_to_evaluate=POINTS, evaluated_rewards=REWARDS)
    assert searcher.set_search_properties("loss", "min", SPACE)
    assert _drive(searcher, 4) == [[-2.5971, "a"], [-1.2747, "b"], [4.8952, "b"], [4.1716, "c"]]


def test_evaluated_rewards_survive_save_and_restore() -> None:
    original = OptunaSearch(SPACE, metric="loss", mode="min", seed=0, points_to_evaluate=POINTS,
                            evaluated_rewards=REWARDS)
    assert _drive(original, 2) == [[-2.5971, "a"], [-1.2747, "b"]]
    resumed = OptunaSearch()
    resumed.restore(pickle.loads(pickle.dumps(original.save())))
    assert _drive(resumed, 2, first=2) == [[4.8952, "b"], [4.1716, "c"]]
    assert len(resumed.study.trials) == 14  # the told points are not told twice
    unasked = OptunaSearch(SPACE, metric="loss", mode="min", seed=0, points_to_evaluate=POINTS,
                           evaluated_rewards=REWARDS)
    fresh = OptunaSearch()
    fresh.restore(pickle.loads(pickle.dumps(unasked.save())))  # saved before its study was made
    assert _drive(fresh, 2) == [[-2.5971, "a"], [-1.2747, "b"]]


def test_bad_evaluated_rewards_are_named() -> None:
    with pytest.raises(TypeError, match="evaluated_rewards must be a list"):
        OptunaSearch(SPACE, "loss", "min", points_to_evaluate=POINTS[:1], evaluated_rewards=(1.0,))
    with pytest.raises(ValueError, match="2 rewards for 1 points"):
        OptunaSearch(SPACE, "loss", "min", points_to_evaluate=POINTS[:1], evaluated_rewards=[1.0, 2.0])
    with pytest.raises(ValueError, match=r"needs a value for each searched parameter; .* none for \['y'\]"):
        OptunaSearch(SPACE, "loss", "min", points_to_evaluate=[{"x": 1.0}], evaluated_rewards=[1.0])
    with pytest.raises(TypeError, match="each of evaluated_rewards must be a number"):
        OptunaSearch(SPACE, "loss", "min", points_to_evaluate=POINTS[:1], evaluated_rewards=["low"])
    with pytest.raises(TypeError, match="define-by-run space cannot take evaluated_rewards"):
        OptunaSearch(lambda trial: None, "loss", "min", points_to_evaluate=[{"x": 1.0}], evaluated_rewards=[1.0])


def test_rewards_without_points_are_ignored_with_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="actors.search._optuna"):
        searcher = OptunaSearch(SPACE, "loss", "min", seed=0, evaluated_rewards=[1.0])
    assert "evaluated_rewards without points_to_evaluate is ignored" in caplog.text
    assert _drive(searcher, 2) == [[0.4881, "a"], [-0.7635, "c"]]  # as Ray 2.60, which says nothing
    assert len(searcher.study.trials) == 2


def test_add_evaluated_point_as_rays() -> None:
    searcher = OptunaSearch(SPACE, "loss", "min", seed=0)
    searcher.add_evaluated_point({"x": 1.0, "y": "c"}, 2.0, intermediate_values=[3.0, 2.5])
    searcher.add_evaluated_point({"x": 2.0, "y": "b"}, 0.0, error=True)
    searcher.add_evaluated_point({"x": 3.0, "y": "a"}, 4.0, pruned=True)
    trials = searcher.study.trials
    assert [(t.state.name, t.value) for t in trials] == [("COMPLETE", 2.0), ("FAIL", None), ("PRUNED", 4.0)]
    assert trials[0].intermediate_values == {0: 3.0, 1: 2.5}
    with pytest.raises(ValueError, match=r"\['z'\] are not searched parameters"):
        searcher.add_evaluated_point({"z": 1.0}, 1.0)
    with pytest.raises(RuntimeError, match="no search space yet"):
        OptunaSearch(metric="loss", mode="min").add_evaluated_point({"x": 1.0}, 1.0)


def test_a_sampler_beside_a_seed_is_used_and_the_seed_ignored_with_a_warning(
        caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="actors.search._optuna"):
        searcher = OptunaSearch(SPACE, "loss", "min", sampler=optuna.samplers.RandomSampler(seed=3), seed=5)
    assert "seed=5 is ignored because a sampler was passed" in caplog.text
    # recorded from Ray 2.60, the same with seed=5, seed=0 or no seed: the sampler's own draws
    assert _drive(searcher, 3) == [[0.508, "a"], [3.9295, "a"], [-4.4853, "c"]]
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="actors.search._optuna"):
        OptunaSearch(SPACE, "loss", "min", sampler=optuna.samplers.RandomSampler(seed=3), seed=0)
    assert "ignored" not in caplog.text  # Ray's check is `if sampler and seed`


def test_a_stored_study_is_continued_as_in_ray(tmp_path: Any) -> None:
    url = f"sqlite:///{tmp_path}/optuna.db"
    first = OptunaSearch(SPACE, "loss", "min", seed=0, storage=optuna.storages.RDBStorage(url))
    _drive(first, 11)
    second = OptunaSearch(SPACE, "loss", "min", seed=0, storage=optuna.storages.RDBStorage(url))
    # recorded from Ray 2.60: the second searcher loads the study "optuna" and TPE models the first's 11 trials
    assert _drive(second, 3) == [[1.0022, "a"], [1.5523, "a"], [2.4498, "a"]]
    assert [(s.study_name, s.n_trials) for s in optuna.get_all_study_summaries(url)] == [("optuna", 14)]
    assert type(second.study.pruner).__name__ == "NopPruner"  # as Ray's study
    with pytest.raises(TypeError, match=r"storage=optuna.storages.RDBStorage\('sqlite:///x.db'\)"):
        OptunaSearch(SPACE, "loss", "min", storage="sqlite:///x.db")


def test_arguments_in_rays_order() -> None:
    """Ray 2.60: (space, metric, mode, points_to_evaluate, sampler, study_name, storage, seed, evaluated_rewards)."""
    searcher = OptunaSearch(SPACE, "loss", "min", POINTS, None, "mine", None, 0, REWARDS)
    assert _drive(searcher, 1) == [[-2.5971, "a"]]
    assert searcher.study.study_name == "mine"


def trainable(config: dict[str, Any]) -> None:
    from actors import report

    report({"loss": (config["x"] - 1) ** 2})


def test_a_stored_study_through_fit(tmp_path: Any) -> None:
    """The searcher runs in the controller: its study reaches the database there, and the script's
    searcher holds the final state after ``fit()``."""
    from actors import RunConfig, TuneConfig, Tuner

    url = f"sqlite:///{tmp_path}/optuna.db"
    searcher = OptunaSearch(seed=0, storage=optuna.storages.RDBStorage(url), points_to_evaluate=POINTS[:2],
                            evaluated_rewards=REWARDS[:2])
    grid = Tuner(trainable, param_space={"x": uniform(-5, 5), "y": choice(["a", "b", "c"])},
                 tune_config=TuneConfig(search_alg=searcher, metric="loss", mode="min", num_samples=3),
                 run_config=RunConfig(storage=str(tmp_path / "runs"), system="simple", verbose=0)).fit()
    assert len(grid) == 3 and not grid.errors
    study = optuna.load_study(study_name="optuna", storage=url)
    assert [t.state.name for t in study.trials] == ["COMPLETE"] * 5
    assert [t.value for t in study.trials[:2]] == REWARDS[:2]
    assert sorted(t.value for t in study.trials[2:]) == sorted(r.metrics["loss"] for r in grid)
    assert len(searcher.study.trials) == 5


def warm_trainable(config: dict[str, Any]) -> None:
    from actors import report

    for i in range(3):
        report({"loss": (config["x"] - 1) ** 2 + i})
        if config["x"] == 3 and i == 1:
            raise RuntimeError("boom")


def test_add_evaluated_trials_of_an_earlier_experiment_as_in_ray(tmp_path: Any) -> None:
    """Recorded from Ray 2.60 with the same experiment (a grid of 8, x=3 fails at its second result):
    the finished trials are told COMPLETE with their last loss, the failed one FAIL, and the next
    suggestions follow from them."""
    from actors import ExperimentAnalysis, RunConfig, Tuner, grid_search
    from actors.search import ConcurrencyLimiter, Repeater

    grid = Tuner(warm_trainable, param_space={"x": grid_search([-4, -3, -2, -1, 0, 2, 3, 4])},
                 run_config=RunConfig(storage=str(tmp_path), name="warm", system="simple", verbose=0)).fit()
    analysis = ExperimentAnalysis(str(tmp_path / "warm"))
    searcher = OptunaSearch({"x": uniform(-5, 5)}, metric="loss", mode="min", seed=0)
    searcher.add_evaluated_trials(analysis, "loss")
    assert sorted((t.state.name, t.value, t.params["x"]) for t in searcher.study.trials) == [
        ("COMPLETE", 3, 0), ("COMPLETE", 3, 2), ("COMPLETE", 6, -1), ("COMPLETE", 11, -2), ("COMPLETE", 11, 4),
        ("COMPLETE", 18, -3), ("COMPLETE", 27, -4), ("FAIL", None, 3)]
    nxt = []
    for i in range(4):
        cfg = searcher.suggest(f"n{i}")
        assert isinstance(cfg, dict)
        searcher.on_trial_complete(f"n{i}", {"loss": (cfg["x"] - 1) ** 2})
        nxt.append(round(cfg["x"], 4))
    assert nxt == [0.4881, 2.1519, 1.0276, 4.4067]
    limiter = ConcurrencyLimiter(OptunaSearch({"x": uniform(-5, 5)}, metric="loss", mode="min", seed=0), 2)
    limiter.add_evaluated_trials(analysis.trials[:2], "loss")  # passed on to the searcher inside, as Ray's
    assert len(limiter.searcher.study.trials) == 2
    with pytest.raises(NotImplementedError):  # as Ray's Repeater
        Repeater(OptunaSearch({"x": uniform(-5, 5)}, metric="loss", mode="min", seed=0), 2).add_evaluated_trials(
            analysis, "loss")
    with pytest.warns(UserWarning, match="no finished trial reported 'nosuch'"):
        searcher.add_evaluated_trials(analysis, "nosuch")
    with pytest.raises(NotImplementedError, match=r"ExperimentAnalysis\(grid.experiment_path\)"):
        searcher.add_evaluated_trials(grid, "loss")  # a ResultGrid: Ray refuses it too


def test_a_trial_stopped_before_it_was_done_is_told_pruned() -> None:
    """Ray's rule: TERMINATED with a last result that is not ``done`` (stopped from outside) is pruned;
    a trial without the metric is passed over."""
    from types import SimpleNamespace

    searcher = OptunaSearch(SPACE, metric="loss", mode="min", seed=0)
    searcher.add_evaluated_trials([
        SimpleNamespace(status="TERMINATED", last_result={"loss": 2.0}, config={"x": 1.0, "y": "a"}),
        SimpleNamespace(status="TERMINATED", last_result={"loss": 1.0, "done": True}, config={"x": 2.0, "y": "b"}),
        SimpleNamespace(status="TERMINATED", last_result={"acc": 1.0, "done": True}, config={"x": 3.0, "y": "c"}),
    ], "loss")
    assert [(t.state.name, t.value) for t in searcher.study.trials] == [("PRUNED", 2.0), ("COMPLETE", 1.0)]
