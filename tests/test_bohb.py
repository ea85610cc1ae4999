"""BOHB: ``actors.search.bohb.TuneBOHB`` with ``actors.schedulers.hb_bohb.HyperBandForBOHB``, as Ray Tune 2.60's.

``tests/data/ray_bohb.json`` was recorded from Ray 2.60 (hpbandster 0.7.4, ConfigSpace 1.2.2) by
``benchmarks/ray_oracle/record_bohb.py``, whose experiments run here under audition: one trial at a time, after
``numpy.random.seed(0)``; per trial in creation order its config, the iterations it reported, its last value.
Before: both were refused ("not ported"). Found on the way: the Tuner's own wrapper kept a searcher's answer to
``set_max_concurrency`` from the ``ConcurrencyLimiter`` that ``max_concurrent_trials`` adds, so a searcher that
limits itself (TuneBOHB, counting running trials only) was limited as if paused trials ran.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from typing import Any

import pytest

import actors as tune
from actors._engine.scheduler_host import SchedulerHost
from actors._engine.trial import TrialSnapshot, TrialStatus
from actors.messages import ActionKind, HookKind, SchedulerCall
from actors.schedulers import FIFOScheduler, create_scheduler
from actors.schedulers.hb_bohb import HyperBandForBOHB
from actors.search import Searcher, create_searcher
from actors.search.bohb import TuneBOHB
from tests._lean import lazy, needs

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "benchmarks", "ray_oracle"))
from record_bohb import loss_of, nested_of, plain, score_of

pytestmark = needs("ConfigSpace", "hpbandster")
np, CS = lazy("numpy"), lazy("ConfigSpace")  # (ConfigSpace brings SciPy: imported by the tests, tests/_lean.py)
DATA = os.path.join(os.path.dirname(__file__), "data", "ray_bohb.json")


def _ray(case: str) -> Any:
    with open(DATA, encoding="utf-8") as f:
        return json.load(f)[case]


def _rewound(iterations: list[int]) -> list[int]:
    """Ray's rows of a trial as audition keeps them: Ray appends a run resumed from the start after the rows of
    the run before (1, 1, 2, 3); audition drops the rows past the checkpoint (none) and the resumed run reports
    them again (1, 2, 3), so the history has no duplicate (docs/coming-from-ray.md)."""
    out: list[int] = []
    for i in iterations:
        while out and out[-1] >= i:
            out.pop()
        out.append(i)
    return out


def _cs() -> Any:
    cs = CS.ConfigurationSpace()
    cs.add(CS.UniformFloatHyperparameter("lr", lower=1e-4, upper=1e-1, log=True))
    cs.add(CS.UniformIntegerHyperparameter("units", lower=8, upper=64))
    cs.add(CS.CategoricalHyperparameter("opt", choices=["sgd", "adam"]))
    return cs


SPACE = {"x": tune.uniform(0, 6), "y": tune.randint(0, 10), "act": tune.choice(["relu", "tanh"])}


def _case(case: str) -> tuple[Any, str, str, Any, Any, Any, int, bool]:
    if case == "dict":
        return (loss_of, "loss", "min", SPACE, TuneBOHB(seed=7),
                HyperBandForBOHB(time_attr="training_iteration", max_t=9, reduction_factor=3), 12, True)
    if case == "configspace":
        return (score_of, "score", "max", None, TuneBOHB(_cs(), metric="score", mode="max", seed=3),
                HyperBandForBOHB(metric="score", mode="max", max_t=27, reduction_factor=3), 15, False)
    if case == "points":
        return (nested_of, "loss", "min", {"opt": {"lr": tune.loguniform(1e-4, 1e-1)}, "n": tune.choice([1, 2, 3])},
                TuneBOHB(points_to_evaluate=[{"opt/lr": 0.01, "n": 1}], mode="min", seed=1),
                HyperBandForBOHB(max_t=4, reduction_factor=2), 6, True)
    return loss_of, "loss", "min", SPACE, TuneBOHB(seed=5, mode="min"), FIFOScheduler(), 4, True


def _run(case: str, storage: str, system: str) -> list[dict[str, Any]]:
    curve, metric, mode, space, searcher, scheduler, samples, tuner_metric = _case(case)

    def train(config: dict[str, Any]) -> None:
        for i in range(1, 40):
            tune.report({metric: curve(config, i)})

    np.random.seed(0)
    grid = tune.Tuner(train, param_space=space,
                      tune_config=tune.TuneConfig(metric=metric if tuner_metric else None,
                                                  mode=mode if tuner_metric else None, search_alg=searcher,
                                                  scheduler=scheduler, num_samples=samples, max_concurrent_trials=1),
                      run_config=tune.RunConfig(storage=storage, name=case, verbose=0, system=system)).fit()
    return [{"config": plain(r.config), "iterations": list(r.metrics_dataframe["training_iteration"]),
             "last": float(f"{r.metrics[metric]:.6g}"), "error": r.error is not None} for r in grid]


@pytest.mark.parametrize("case,system", [("dict", "simple"), ("configspace", "simple"), ("points", "multiproc"),
                                         ("fifo", "simple")])
def test_bohb_runs_as_rays(case: str, system: str, storage_dir: str, no_leaks: None) -> None:
    """The same configs (random at first, then from hpbandster's models fitted on the budgets HyperBandForBOHB
    reported), the same pauses, halvings and stops, the same last values."""
    expected = [{**t, "iterations": _rewound(t["iterations"])} for t in _ray(case)["trials"]]
    assert _run(case, storage_dir, system) == expected


def test_hyperband_for_bohb_needs_a_searcher_with_on_pause(storage_dir: str, no_leaks: None) -> None:
    """Ray 2.60 fails (TuneError around an AttributeError, recorded) at the first pause with the default
    generator; audition's run ends there too, naming what to use."""
    assert _ray("errors")["default_searcher"].startswith("TuneError")

    def train(config: dict[str, Any]) -> None:
        for _ in range(3):
            tune.report({"loss": config["x"]})

    with pytest.raises(tune.TuneError, match=r"on_pause\(\).*BasicVariantGenerator.*TuneBOHB"):
        tune.Tuner(train, param_space={"x": tune.uniform(0, 1)},
                   tune_config=tune.TuneConfig(metric="loss", mode="min", num_samples=3,
                                               scheduler=HyperBandForBOHB(max_t=3)),
                   run_config=tune.RunConfig(storage=storage_dir, verbose=0, system="simple")).fit()


def test_convert_search_space_as_rays(caplog: pytest.LogCaptureFixture) -> None:
    errors = _ray("errors")
    with pytest.raises(ValueError) as grid:
        TuneBOHB.convert_search_space({"x": tune.grid_search([1, 2])})
    assert f"ValueError: {grid.value}" == errors["grid"]
    with pytest.raises(ValueError, match="TuneBOHB does not support unbounded normal distributions"):
        TuneBOHB.convert_search_space({"x": tune.randn(0, 1)})
    with caplog.at_level(logging.WARNING, logger="audition"):
        got = TuneBOHB.convert_search_space({"q": tune.qrandint(0, 10, 2), "l": tune.lograndint(1, 100),
                                             "c": tune.uniform(-2, 2)})
    assert "Dropped quantization for parameter 'q'" in caplog.text
    assert {hp.name: (type(hp).__name__, hp.lower, hp.upper, hp.log) for hp in got.values()} == {
        "q": ("UniformIntegerHyperparameter", 0, 9, False), "l": ("UniformIntegerHyperparameter", 1, 99, True),
        "c": ("UniformFloatHyperparameter", -2.0, 2.0, False)}
    for line in ("c, Type: UniformFloat, Range: [-2.0, 2.0]", "l, Type: UniformInteger, Range: [1, 99], Default: 10, "
                 "on log-scale", "q, Type: UniformInteger, Range: [0, 9]"):
        assert line in errors["converted"] and line in str(got)


def test_names_and_module_paths() -> None:
    import actors.search.bohb as bohb_module
    from actors._cli.main import _audition_has
    from actors._cli.migrate import migrate

    assert isinstance(create_searcher("bohb", seed=1), TuneBOHB)
    assert isinstance(create_scheduler("hb_bohb", max_t=9), HyperBandForBOHB)
    from hpbandster.optimizers.config_generators.bohb import BOHB

    assert bohb_module.BOHB is BOHB  # (Ray's module exports hpbandster's generator under that name)
    out = migrate("from ray.tune.search.bohb import TuneBOHB\nfrom ray.tune.schedulers.hb_bohb import "
                  "HyperBandForBOHB\n", _audition_has)
    assert not out.warnings
    assert out.text == ("from actors.search.bohb import TuneBOHB\nfrom actors.schedulers.hb_bohb import "
                        "HyperBandForBOHB\n")


def test_a_restored_searcher_suggests_what_the_original_would() -> None:
    np.random.seed(3)
    a = TuneBOHB(seed=2, metric="loss", mode="min")
    a.set_search_properties(None, None, dict(SPACE))
    a.capture_driver_stream()
    for i in range(8):  # enough budgets for hpbandster to fit its models
        config = a.suggest(f"t{i}")
        a.on_trial_result(f"t{i}", {"loss": loss_of(config, 1), "hyperband_info": {"budget": 1}})
        a.on_pause(f"t{i}")
    b = TuneBOHB()
    b.restore(a.save())
    assert b.paused == a.paused and not b.running
    after = [a.suggest(f"u{i}") for i in range(3)]
    assert after == [b.suggest(f"u{i}") for i in range(3)] and isinstance(after[0], dict)


def _snap(tid: str, status: TrialStatus = TrialStatus.RUNNING) -> TrialSnapshot:
    return TrialSnapshot(tid, {"x": 1.0}, status)


def test_the_hook_hands_the_searcher_its_result_and_its_calls() -> None:
    """Each result comes back as the hook left it (``hyperband_info``), and a pause's ``on_pause`` is a
    SEARCHER action the controller makes before the searcher hears of the result."""
    host = SchedulerHost(HyperBandForBOHB(max_t=9), "loss", "min")
    host.handle(SchedulerCall(1, HookKind.ADD, "a", (), (_snap("a", TrialStatus.PENDING),)))
    reply = host.handle(SchedulerCall(2, HookKind.RESULT, "a", ({"loss": 1.0, "training_iteration": 1},),
                                      (_snap("a"),)))
    assert reply.decision == tune.schedulers.Decision.PAUSE
    assert reply.notes[0] is not None and reply.notes[0]["hyperband_info"] == {"budget": 1}
    assert [(a.kind, a.method, a.args) for a in reply.actions] == [(ActionKind.SEARCHER, "on_pause", ("a",))]


def test_a_searcher_that_limits_itself_is_left_to_it(storage_dir: str, no_leaks: None) -> None:
    """``max_concurrent_trials`` with a searcher whose ``set_max_concurrency`` says True: the limit is its own
    (Ray's contract), also behind the Tuner's wrapper of the param_space's constants."""

    class Own(Searcher):
        def __init__(self) -> None:
            super().__init__("loss", "min")
            self.limit = 0
            self.n = 0

        def set_max_concurrency(self, max_concurrent: int) -> bool:
            self.limit = max_concurrent
            return True

        def suggest(self, trial_id: str) -> dict[str, Any] | None:
            self.n += 1
            return {"x": float(self.n)} if self.n <= 3 else Searcher.FINISHED

        def on_trial_complete(self, trial_id: str, result: dict[str, Any] | None = None,
                              error: bool = False) -> None:
            pass

    def train(config: dict[str, Any]) -> None:
        tune.report({"loss": config["x"] + config["k"]})

    own = Own()
    grid = tune.Tuner(train, param_space={"k": 1},
                      tune_config=tune.TuneConfig(search_alg=own, max_concurrent_trials=2, num_samples=5),
                      run_config=tune.RunConfig(storage=storage_dir, verbose=0, system="simple")).fit()
    assert sorted(r.metrics["loss"] for r in grid) == [2.0, 3.0, 4.0]
    from actors.search._wrappers import ConcurrencyLimiter, ConstantsMerged

    limiter = ConcurrencyLimiter(ConstantsMerged(Own(), {"k": 1}), max_concurrent=2)
    assert limiter._limit is False and limiter.searcher.searcher.limit == 2


class _CtrlCAt(tune.Callback):
    """Ctrl-C at the n-th result the driver sees."""

    def __init__(self, n: int) -> None:
        self.n, self.seen = n, 0

    def on_trial_result(self, iteration: int, trials: Any, trial: Any, result: dict[str, Any], **info: Any) -> None:
        self.seen += 1
        if self.seen == self.n:
            raise KeyboardInterrupt


def _interrupted_then_restored(storage: str, n: int) -> list[dict[str, Any]]:
    curve, metric, _, space, searcher, scheduler, samples, _ = _case("dict")

    def train(config: dict[str, Any]) -> None:
        for i in range(1, 40):
            tune.report({metric: curve(config, i)})

    np.random.seed(0)
    with pytest.raises(KeyboardInterrupt):
        tune.Tuner(train, param_space=space,
                   tune_config=tune.TuneConfig(metric=metric, mode="min", search_alg=searcher, scheduler=scheduler,
                                               num_samples=samples, max_concurrent_trials=1),
                   run_config=tune.RunConfig(storage=storage, name="cut", verbose=0, system="simple",
                                             callbacks=[_CtrlCAt(n)])).fit()
    grid = tune.Tuner.restore(os.path.join(storage, "cut"), train, resume_unfinished=True).fit()
    return [{"config": plain(r.config), "iterations": list(r.metrics_dataframe.get("training_iteration", [])),
             "last": float(f"{r.metrics[metric]:.6g}") if metric in r.metrics else None,
             "error": r.error is not None} for r in grid]


@pytest.mark.parametrize("n", [9, 12])
def test_a_bohb_run_stopped_and_restored_ends_as_rays_uninterrupted_run(n: int, storage_dir: str,
                                                                        no_leaks: None) -> None:
    """Ctrl-C while trials wait paused at their milestones (the 9th result: the bracket's last trial; the 12th:
    promoted trials resumed), then ``Tuner.restore``: the searcher's model and the brackets come back, and the
    experiment ends with Ray's configs and values."""
    expected = [{**t, "iterations": _rewound(t["iterations"])} for t in _ray("dict")["trials"]]
    assert _interrupted_then_restored(storage_dir, n) == expected


def test_a_paused_trial_keeps_its_results_through_a_restore(storage_dir: str, no_leaks: None) -> None:
    """Ctrl-C at the 3rd result: trials 0 and 1 wait paused at milestone 1 with no checkpoint. Restored, the
    halving stops trial 0 before it runs again; it ends with its result, as in the run never stopped. Before,
    the restore dropped every row past a paused trial's checkpoint (here all of them), so trial 0 ended with
    no result at all. (The trial running at the Ctrl-C redoes its result, which the searcher hears again, as
    in Ray, so the later model-based configurations differ from the uninterrupted run's.)"""
    got = _interrupted_then_restored(storage_dir, 3)
    ray = _ray("dict")["trials"]
    assert got[:7] == [{**t, "iterations": _rewound(t["iterations"])} for t in ray[:7]]
    assert all(t["iterations"] for t in got)


def test_the_schedulers_said_to_leave_results_as_they_are_do() -> None:
    """``_leaves_results`` spares the result copy per hook call (SchedulerHost.watch_results); checked here with
    the watch forced on: 3 trials x 9 results each, no reply carries a changed result. HyperBandForBOHB, which
    declares nothing, is watched, and a user's subclass of a declaring class is too."""
    from actors.schedulers import (
        PB2,
        ASHAScheduler,
        HyperBandScheduler,
        MedianStoppingRule,
        PopulationBasedTraining,
    )

    for sched in (ASHAScheduler(max_t=9, grace_period=1), HyperBandScheduler(max_t=9),
                  MedianStoppingRule(time_attr="training_iteration", grace_period=1, min_samples_required=1),
                  PopulationBasedTraining(time_attr="training_iteration", perturbation_interval=2,
                                          hyperparam_mutations={"x": [1.0, 2.0]}),
                  PB2(time_attr="training_iteration", perturbation_interval=2, hyperparam_bounds={"x": [0.0, 3.0]})):
        assert type(sched).__dict__["_leaves_results"] is True
        host = SchedulerHost(sched, "loss", "min")
        assert not host.watch_results
        host.watch_results = True
        seq = 0
        for tid in "abc":
            seq += 1
            host.handle(SchedulerCall(seq, HookKind.ADD, tid, (), (_snap(tid, TrialStatus.PENDING),)))
        for i in range(1, 10):
            for j, tid in enumerate("abc"):
                seq += 1
                reply = host.handle(SchedulerCall(seq, HookKind.RESULT, tid, (
                    {"loss": 1.0 / i + j, "training_iteration": i, "time_total_s": float(i)},), (_snap(tid),)))
                assert reply.notes == (), (type(sched).__name__, reply.notes)
    assert SchedulerHost(HyperBandForBOHB(max_t=9), "loss", "min").watch_results

    class Mine(ASHAScheduler):
        pass

    assert SchedulerHost(Mine(max_t=9), "loss", "min").watch_results
