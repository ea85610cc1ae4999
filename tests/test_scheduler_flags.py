"""The flags that give Ray Tune's scheduler behaviour where audition's default differs on purpose, end to
end (their decisions are compared with Ray's in tests/test_ray_scheduler_fidelity.py)."""

from __future__ import annotations

from typing import Any

import pytest

from actors import RunConfig, TuneConfig, TuneError, Tuner, report
from actors._driver.checks import required_metrics
from actors._engine.trial import TrialSnapshot, TrialStatus
from actors.schedulers import ASHAScheduler, MedianStoppingRule


def sometimes_silent(config: dict[str, Any]) -> None:
    """Every third result has no 'score' (e.g. an evaluation that runs only now and then)."""
    for i in range(1, 7):
        report({"other": i} if i % 3 == 0 else {"score": config["x"] * i})


@pytest.mark.parametrize("make", [
    lambda: ASHAScheduler(metric="score", mode="max", max_t=6, grace_period=1, skip_missing=True),
    lambda: MedianStoppingRule(metric="score", mode="max", grace_period=1, skip_missing=True),
])
def test_skip_missing_runs_through_results_without_the_metric(make: Any, storage_dir: str) -> None:
    grid = Tuner(sometimes_silent, param_space={"x": 1.0}, tune_config=TuneConfig(scheduler=make()),
                 run_config=RunConfig(name="skip", storage=storage_dir, system="simple", verbose=0)).fit()
    assert grid.num_errors == 0 and grid[0].status is TrialStatus.TERMINATED
    assert len(grid[0].metrics_history) == 6


def test_without_skip_missing_the_missing_metric_is_an_error(storage_dir: str) -> None:
    sched = ASHAScheduler(metric="score", mode="max", max_t=6, grace_period=1)
    with pytest.raises(TuneError, match="without the metric 'score'"):
        Tuner(sometimes_silent, param_space={"x": 1.0}, tune_config=TuneConfig(scheduler=sched),
              run_config=RunConfig(name="strict", storage=storage_dir, system="simple", verbose=0)).fit()


def test_rays_switch_turns_the_strict_metric_check_off(monkeypatch: pytest.MonkeyPatch) -> None:
    sched = ASHAScheduler(metric="score", mode="max")
    assert required_metrics("loss", sched, None) == (("loss", "TuneConfig(metric=...)"),
                                                     ("score", "AsyncHyperBandScheduler(metric=...)"))
    assert required_metrics(None, ASHAScheduler(metric="score", mode="max", skip_missing=True), None) == ()
    monkeypatch.setenv("TUNE_DISABLE_STRICT_METRIC_CHECKING", "1")
    assert required_metrics("loss", sched, None) == ()


def test_the_strict_metric_check_names_the_users_searcher_not_the_tuners_wrapper() -> None:
    from actors.search import BasicVariantGenerator, Searcher
    from actors.search._wrappers import ConstantsMerged

    class Mine(Searcher):
        def suggest(self, trial_id: str) -> dict[str, float]:
            return {"x": 1.0}

        def on_trial_complete(self, trial_id: str, result: dict[str, float] | None = None,
                              error: bool = False) -> None:
            pass

    wrapped = ConstantsMerged(Mine(metric="acc", mode="max"), {"c": 1})
    assert required_metrics(None, None, wrapped) == (("acc", "Mine(metric=...)"),)
    assert required_metrics(None, None, BasicVariantGenerator()) == ()


def test_random_brackets_continue_their_draws_after_a_restore() -> None:
    def adds(s: ASHAScheduler, ids: range) -> list[int]:
        for i in ids:
            s.on_trial_add(None, TrialSnapshot(f"t{i}", {}, TrialStatus.PENDING))  # type: ignore[arg-type]
        return [s.bracket_of(f"t{i}") for i in ids]

    def new() -> ASHAScheduler:
        return ASHAScheduler(metric="m", mode="max", max_t=81, brackets=4, random_brackets=True, seed=5)

    straight = adds(new(), range(40))
    first = new()
    head = adds(first, range(20))
    again = new()
    again.restore(first.save())
    assert head + adds(again, range(20, 40)) == straight
    assert len(set(straight)) > 1
