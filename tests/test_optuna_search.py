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
    rnd = min(loss for _, loss in _run(BasicVariantGenerator(param_space=QUADRATIC, num_samples=60, seed=0), 60))
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


# ------------------------------------------------------------------ define-by-run (Ray's space=<function>)

def _define(trial: Any) -> dict[str, Any]:
    """Conditional space as in Ray's optuna_define_by_run example, plus a nested name and a constant."""
    act = trial.suggest_categorical("activation", ["relu", "tanh"])
    trial.suggest_float("x", -10, 10)
    trial.suggest_float("y", -10, 10)
    if act == "relu":
        trial.suggest_int("model/width", 1, 4)
    return {"steps": 3, "model/kind": "mlp"}


def test_define_by_run_space_builds_configs_from_suggestions_and_constants() -> None:
    searcher = OptunaSearch(space=_define, metric="loss", mode="min", seed=3)
    history = _run(searcher, 40)
    configs = [c for c, _ in history]
    assert all(c["steps"] == 3 and c["model"]["kind"] == "mlp" for c in configs)
    relu = [c for c in configs if c["activation"] == "relu"]
    tanh = [c for c in configs if c["activation"] == "tanh"]
    assert relu and tanh
    assert all(1 <= c["model"]["width"] <= 4 for c in relu)
    assert all("width" not in c["model"] for c in tanh)  # the conditional parameter exists only for relu
    assert min(loss for _, loss in history) < 2.0  # TPE learned from what it was told
    trial = searcher.study.trials[0]
    assert trial.state == optuna.trial.TrialState.COMPLETE and trial.intermediate_values


def test_define_by_run_save_restore_continues_exactly() -> None:
    original = OptunaSearch(space=_define, metric="loss", mode="min", seed=5)
    _run(original, 12)
    state = cloudpickle.loads(cloudpickle.dumps(original.save()))
    expected = _run(original, 8, start=12)
    resumed = OptunaSearch()
    resumed.restore(state)
    assert _run(resumed, 8, start=12) == expected


def test_define_by_run_points_to_evaluate() -> None:
    point = {"activation": "relu", "x": 2.0, "y": -1.0, "model/width": 2}
    searcher = OptunaSearch(space=_define, metric="loss", mode="min", points_to_evaluate=[point], seed=0)
    first = searcher.suggest("a")
    assert first == {"activation": "relu", "x": 2.0, "y": -1.0, "model": {"width": 2, "kind": "mlp"}, "steps": 3}


def test_define_by_run_mistakes_are_named() -> None:
    def returns_list(trial: Any) -> Any:
        trial.suggest_float("x", 0, 1)
        return [1]

    def raises(trial: Any) -> None:
        raise KeyError("oops")

    with pytest.raises(TypeError, match=r"define-by-run function returns_list\(trial\) returned a list"):
        OptunaSearch(space=returns_list, metric="loss", mode="min").suggest("a")
    searcher = OptunaSearch(space=raises, metric="loss", mode="min")
    with pytest.raises(KeyError) as info:
        searcher.suggest("a")
    assert any("define-by-run function raises(trial)" in note for note in info.value.__notes__)
    assert searcher.study.trials[0].state == optuna.trial.TrialState.FAIL  # no trial left RUNNING
    with pytest.raises(TypeError, match="define-by-run function"):
        OptunaSearch(space=42, metric="loss", mode="min")  # type: ignore[arg-type]
    # a define-by-run space and a param_space are two spaces: refused (the Tuner makes it a ConfigError)
    assert not OptunaSearch(space=_define).set_search_properties("loss", "min", {"x": uniform(0, 1)})
    assert OptunaSearch(space=_define).set_search_properties("loss", "min", {})


# ------------------------------------------------------------------ multi-objective (metric=[...], mode=[...])

def _two_objectives(searcher: Searcher, trials: int) -> list[dict[str, Any]]:
    out = []
    for i in range(trials):
        config = searcher.suggest(f"t{i}")
        assert isinstance(config, dict)
        result = {"loss": (config["x"] - 2) ** 2, "gain": config["x"], "training_iteration": 1}
        searcher.on_trial_result(f"t{i}", result)
        searcher.on_trial_complete(f"t{i}", result)
        out.append(config)
    return out


def test_multi_objective_tells_optuna_every_metric() -> None:
    searcher = OptunaSearch({"x": uniform(0, 10)}, metric=["loss", "gain"], mode=["min", "max"], seed=0)
    assert searcher.metric == ["loss", "gain"] and searcher.mode == ["min", "max"] and searcher.multi_objective
    _two_objectives(searcher, 20)
    study = searcher.study
    assert [d.name for d in study.directions] == ["MINIMIZE", "MAXIMIZE"]
    done = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
    assert len(done) == 20 and all(len(t.values) == 2 for t in done)
    assert all(t.values == [(t.params["x"] - 2) ** 2, t.params["x"]] for t in done)
    assert all(not t.intermediate_values for t in done)  # Optuna keeps no intermediate values for several
    pareto = {round(t.params["x"], 9) for t in study.best_trials}
    assert pareto and all(x >= 2 - 1e-9 for x in pareto)  # left of the loss optimum is dominated


def test_multi_objective_missing_metric_prunes_and_restores() -> None:
    searcher = OptunaSearch({"x": uniform(0, 10)}, metric=["loss", "gain"], mode=["min", "max"], seed=1)
    searcher.suggest("a")
    searcher.on_trial_complete("a", {"loss": 1.0})  # gain missing: not a complete multi-objective value
    assert searcher.study.trials[0].state == optuna.trial.TrialState.PRUNED
    resumed = OptunaSearch()
    resumed.restore(cloudpickle.loads(cloudpickle.dumps(searcher.save())))
    assert resumed.metric == ["loss", "gain"] and resumed.mode == ["min", "max"]
    assert len(_two_objectives(resumed, 3)) == 3


def test_multi_objective_argument_errors_and_search_properties() -> None:
    for metric, mode in ((["loss", "gain"], "min"), ("loss", ["min"]), (["loss", "gain"], ["min"]),
                         ([], []), (["loss", "loss"], ["min", "max"])):
        with pytest.raises(ValueError, match=r"OptunaSearch: .*metric"):
            OptunaSearch(metric=metric, mode=mode)
    with pytest.raises(ValueError, match="every mode must be 'min' or 'max'"):
        OptunaSearch(metric=["loss", "gain"], mode=["min", "maximize"])
    multi = OptunaSearch(metric=["loss", "gain"], mode=["min", "max"])
    assert multi.set_search_properties("gain", "max", {"x": uniform(0, 1)})  # TuneConfig's objective is one of them
    assert multi.metric == ["loss", "gain"]
    assert not OptunaSearch(metric=["loss", "gain"], mode=["min", "max"]).set_search_properties("acc", "max", {})
    assert not OptunaSearch(metric=["loss", "gain"], mode=["min", "max"]).set_search_properties("gain", "min", {})
    assert ConcurrencyLimiter(multi, 2).metric == ["loss", "gain"]


def multi_trainable(config: dict[str, Any]) -> None:
    from actors import report

    for step in range(1, 3):
        loss = (config["x"] - 2) ** 2 + 1 / step
        report({"loss": loss, "gain": loss * config["x"]})


def gain_only(config: dict[str, Any]) -> None:
    from actors import report

    report({"gain": config["x"]})


def test_multi_objective_tuner_run_and_best_results(tmp_path: Any) -> None:
    from actors import RunConfig, TuneConfig, Tuner
    from actors._driver.errors import ConfigError, TuneError

    def tuner(trainable: Any, **tc: Any) -> Tuner:
        searcher = OptunaSearch(metric=["loss", "gain"], mode=["min", "max"], seed=0)
        return Tuner(trainable, param_space={"x": uniform(0, 10)},
                     tune_config=TuneConfig(search_alg=ConcurrencyLimiter(searcher, 2), num_samples=6, **tc),
                     run_config=RunConfig(storage=str(tmp_path), system="simple", verbose=0))

    grid = tuner(multi_trainable).fit()
    assert len(grid) == 6 and not grid.errors
    best_loss = grid.get_best_result("loss", "min")
    best_gain = grid.get_best_result("gain", "max")
    assert best_loss.metrics["loss"] == min(r.metrics["loss"] for r in grid)
    assert best_gain.metrics["gain"] == max(r.metrics["gain"] for r in grid)
    with pytest.raises(Exception, match="metric"):
        grid.get_best_result()  # as in Ray: no TuneConfig metric, so the caller must name one
    with pytest.raises(TuneError, match="without the metric 'loss'"):  # every searched metric is required
        tuner(gain_only).fit()  # in every result (Ray's strict check)
    with pytest.raises(ConfigError, match="agrees with TuneConfig"):
        tuner(multi_trainable, metric="acc", mode="max")


def steps_trainable(config: dict[str, Any]) -> None:
    from actors import report

    for _ in range(config["steps"]):
        report({"loss": (config["x"] - 2) ** 2 + (config["y"] + 1) ** 2, "width": config["model"].get("width")})


def test_define_by_run_through_the_tuner(tmp_path: Any) -> None:
    from actors import RunConfig, TuneConfig, Tuner

    grid = Tuner(steps_trainable, tune_config=TuneConfig(
        metric="loss", mode="min", num_samples=4, search_alg=OptunaSearch(space=_define, seed=0)),
        run_config=RunConfig(storage=str(tmp_path), system="simple", verbose=0)).fit()
    assert len(grid) == 4 and not grid.errors
    assert all(r.metrics["training_iteration"] == 3 and r.config["model"]["kind"] == "mlp" for r in grid)
    assert {r.config["activation"] for r in grid} <= {"relu", "tanh"}


def test_repeater_averages_every_objective() -> None:
    from actors.search import Repeater

    inner = OptunaSearch({"x": uniform(0, 10)}, metric=["loss", "gain"], mode=["min", "max"], seed=0)
    repeater = Repeater(inner, repeat=2)
    for tid, loss, gain in (("a", 1.0, 4.0), ("b", 3.0, float("nan"))):
        assert isinstance(repeater.suggest(tid), dict)
        repeater.on_trial_complete(tid, {"loss": loss, "gain": gain})
    assert inner.study.trials[0].values == [2.0, 4.0]  # NaN left out of the mean, as for one objective


def test_constants_beside_a_searchers_own_space_join_every_config_as_in_ray(tmp_path: Any) -> None:
    """Ray merges a constants-only param_space into each suggestion of a searcher built with its own
    space (the searcher's values win); a param_space with search domains is still refused."""
    from actors import RunConfig, TuneConfig, Tuner
    from actors._driver.errors import ConfigError

    def tuner(space: dict[str, Any], metric: str = "loss") -> Tuner:
        searcher = OptunaSearch(space=_define, metric="loss", mode="min", seed=0)
        return Tuner(steps_trainable, param_space=space,
                     tune_config=TuneConfig(search_alg=searcher, num_samples=3, metric=metric, mode="min"),
                     run_config=RunConfig(storage=str(tmp_path), system="simple", verbose=0))

    grid = tuner({"extra": 7, "steps": 99, "model": {"depth": 3}}).fit()
    assert len(grid) == 3 and not grid.errors
    for r in grid:
        assert r.config["extra"] == 7
        assert r.config["steps"] == 3 and len(r.metrics_history) == 3  # the searcher's value wins
        assert r.config["model"]["depth"] == 3 and r.config["model"]["kind"] == "mlp"  # nested dicts merged
    with pytest.raises(ConfigError, match="search domains at x"):
        tuner({"x": uniform(0, 1)})
    with pytest.raises(ConfigError, match="agrees with TuneConfig"):
        tuner({"steps": 2}, metric="acc")
