"""OptunaSearch: space conversion, ask/tell loop, optimisation quality and save/restore."""

from __future__ import annotations

import sys
from typing import Any

import cloudpickle
import pytest

from actors.search import (
    BasicVariantGenerator,
    ConcurrencyLimiter,
    OptunaSearch,
    Searcher,
    SearchSpaceError,
    choice,
    grid_search,
    lograndint,
    loguniform,
    qloguniform,
    qrandint,
    quniform,
    randint,
    randn,
    sample_from,
    uniform,
)

optuna = pytest.importorskip("optuna")
optuna.logging.set_verbosity(optuna.logging.WARNING)

QUADRATIC: dict[str, Any] = {"x": uniform(-10, 10), "y": uniform(-10, 10)}


def _loss(config: dict[str, Any]) -> float:
    return float((config["x"] - 2) ** 2 + (config["y"] + 1) ** 2)


def _run(searcher: Searcher, trials: int, start: int = 0) -> list[tuple[dict[str, Any], float]]:
    """Drive a searcher like the controller does: suggest, a few results, complete."""
    history = []
    for i in range(start, start + trials):
        config = searcher.suggest(f"t{i}")
        if config is Searcher.FINISHED:
            break
        assert isinstance(config, dict)
        loss = _loss(config)
        for step in (1, 2):
            searcher.on_trial_result(f"t{i}", {"loss": loss * (3 - step), "training_iteration": step})
        searcher.on_trial_complete(f"t{i}", {"loss": loss, "training_iteration": 2})
        history.append((config, loss))
    return history


def test_optuna_beats_random_search_on_a_quadratic() -> None:
    tpe = min(loss for _, loss in _run(OptunaSearch(QUADRATIC, "loss", "min", seed=0), 60))
    rnd = min(loss for _, loss in _run(BasicVariantGenerator(QUADRATIC, num_samples=60, seed=0), 60))
    assert tpe < rnd
    assert tpe < 0.5


def test_maximize_mode() -> None:
    searcher = OptunaSearch({"x": uniform(0, 1)}, metric="score", mode="max", seed=1)
    for i in range(30):
        config = searcher.suggest(str(i))
        assert isinstance(config, dict)
        searcher.on_trial_complete(str(i), {"score": config["x"]})
    assert searcher.study.best_value > 0.95


def test_space_conversion_keeps_audition_semantics() -> None:
    space = {
        "model": {"width": qrandint(8, 64, 8), "depth": randint(1, 4)},
        "lr": loguniform(1e-5, 1e-1),
        "drop": quniform(0, 0.3, 0.1),
        "units": lograndint(1, 100),
        "act": choice(["relu", "tanh"]),
        "shape": choice([[1, 2], [3, 4]]),
        "const": "kept",
        "scaled": sample_from(lambda spec: spec.config.lr * 10),
    }
    searcher = OptunaSearch(space, "loss", "min", seed=3)
    initial = searcher.study
    assert initial is None  # the study is created lazily on the first suggestion
    for i in range(40):
        config = searcher.suggest(str(i))
        assert isinstance(config, dict)
        assert config["model"]["width"] in range(8, 65, 8)
        assert 1 <= config["model"]["depth"] <= 3
        assert 1e-5 <= config["lr"] <= 1e-1
        assert config["drop"] in (0.0, 0.1, 0.2, 0.3)
        assert 1 <= config["units"] <= 99
        assert config["act"] in ("relu", "tanh") and config["shape"] in ([1, 2], [3, 4])
        assert config["const"] == "kept" and config["scaled"] == pytest.approx(config["lr"] * 10)
        searcher.on_trial_complete(str(i), {"loss": config["lr"]})
    distributions = searcher.study.trials[0].distributions
    assert distributions["model/width"] == optuna.distributions.IntDistribution(8, 64, step=8)
    assert distributions["model/depth"] == optuna.distributions.IntDistribution(1, 3)
    assert distributions["lr"] == optuna.distributions.FloatDistribution(1e-5, 1e-1, log=True)
    assert distributions["drop"] == optuna.distributions.FloatDistribution(0, 0.3, step=0.1)
    assert distributions["units"] == optuna.distributions.IntDistribution(1, 99, log=True)
    assert distributions["act"] == optuna.distributions.CategoricalDistribution(["relu", "tanh"])


@pytest.mark.parametrize(
    ("space", "fragment"),
    [
        ({"a": grid_search([1, 2])}, "'a': grid_search is not supported by OptunaSearch"),
        ({"a": {"b": randn(0, 1)}}, "'a/b': randn(mean=0.0, sd=1.0) is not supported"),
        ({"a": qloguniform(1e-3, 1, 1e-3)}, "Optuna cannot quantize log ranges"),
        ({"a": choice([{"b": uniform(0, 1)}])}, "categories holding domains are not supported"),
    ],
)
def test_unsupported_domains_are_rejected(space: dict[str, Any], fragment: str) -> None:
    with pytest.raises(SearchSpaceError) as info:
        OptunaSearch(space, "loss", "min")
    assert fragment in str(info.value)


def test_argument_errors() -> None:
    with pytest.raises(ValueError, match="pass either sampler= or seed=, not both"):
        OptunaSearch(QUADRATIC, sampler=optuna.samplers.RandomSampler(seed=0), seed=1)
    with pytest.raises(ValueError, match="mode must be 'min' or 'max'"):
        OptunaSearch(QUADRATIC, "loss", "minimize")
    with pytest.raises(ValueError, match="not searched parameters; use names from"):
        OptunaSearch(QUADRATIC, "loss", "min", points_to_evaluate=[{"z": 1}])
    with pytest.raises(ValueError, match="needs metric and mode"):
        OptunaSearch(QUADRATIC).suggest("a")
    with pytest.raises(ValueError, match="has no search space"):
        OptunaSearch(metric="loss", mode="min").suggest("a")


def test_missing_optuna_gives_install_hint(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "optuna", None)
    with pytest.raises(ImportError, match=r"pip install 'audition\[optuna\]'"):
        OptunaSearch(QUADRATIC, "loss", "min")


def test_space_and_metric_from_search_properties() -> None:
    searcher = OptunaSearch(seed=0)
    assert searcher.set_search_properties("loss", "min", QUADRATIC)
    assert not searcher.set_search_properties("loss", "min", {"z": uniform(0, 1)})  # second space clashes
    assert not searcher.set_search_properties("acc", "min", None)
    assert len(_run(searcher, 3)) == 3


def test_points_to_evaluate_come_first() -> None:
    points = [{"x": 2.0, "y": -1.0}, {"x": 0.5}]
    searcher = OptunaSearch(QUADRATIC, "loss", "min", points_to_evaluate=points, seed=0)
    history = _run(searcher, 3)
    assert history[0] == ({"x": 2.0, "y": -1.0}, 0.0)
    assert history[1][0]["x"] == 0.5


def test_results_and_outcomes_reach_the_study() -> None:
    searcher = OptunaSearch(QUADRATIC, "loss", "min", seed=0)
    for tid in ("ok", "err", "nometric"):
        searcher.suggest(tid)
    searcher.on_trial_result("ok", {"loss": 4.0, "training_iteration": 1})
    searcher.on_trial_result("ok", {"loss": 3.0})  # no training_iteration: next step is used
    searcher.on_trial_result("ok", {"other": 1})  # no metric: ignored
    searcher.on_trial_complete("ok", {"loss": 2.5})
    searcher.on_trial_complete("err", {"loss": 1.0}, error=True)
    searcher.on_trial_complete("nometric", {"other": 1})
    searcher.on_trial_complete("unknown", {"loss": 0.0})  # ignored
    ok, err, nometric = searcher.study.trials
    states = optuna.trial.TrialState
    assert ok.state == states.COMPLETE and ok.value == 2.5 and ok.intermediate_values == {1: 4.0, 2: 3.0}
    assert err.state == states.FAIL and nometric.state == states.PRUNED


def test_save_restore_continues_exactly() -> None:
    space = {**QUADRATIC, "k": choice([[1], [2], [3]]), "n": qrandint(0, 20, 5)}
    original = OptunaSearch(space, "loss", "min", seed=7)
    _run(original, 14)
    live = original.suggest("live")
    assert isinstance(live, dict)
    original.on_trial_result("live", {"loss": 9.0, "training_iteration": 1})
    state = cloudpickle.loads(cloudpickle.dumps(original.save()))

    original.on_trial_complete("live", {"loss": 1.0})
    expected = _run(original, 10, start=14)

    resumed = OptunaSearch()
    resumed.restore(state)
    assert resumed.metric == "loss" and resumed.mode == "min"
    resumed.on_trial_complete("live", {"loss": 1.0})
    assert _run(resumed, 10, start=14) == expected
    assert resumed.study.trials[14].intermediate_values == {1: 9.0}
    assert len(resumed.study.trials) == len(original.study.trials) == 25


def test_save_before_first_suggestion_and_inside_limiter() -> None:
    limiter = ConcurrencyLimiter(OptunaSearch(QUADRATIC, "loss", "min", seed=2), max_concurrent=1)
    state = cloudpickle.loads(cloudpickle.dumps(limiter.save()))
    expected = _run(limiter, 12)
    resumed = ConcurrencyLimiter(OptunaSearch(), max_concurrent=1)
    resumed.restore(state)
    assert _run(resumed, 12) == expected
