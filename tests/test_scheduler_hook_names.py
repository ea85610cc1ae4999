"""The scheduler hooks' parameters have Ray Tune 2.60's names (read from Ray 2.60's source, the same on
every one of its schedulers: ``on_trial_result(self, tune_controller, trial, result)`` ...), so a
scheduler ported from Ray that calls its base class's hook by keyword runs unchanged. Before, the
first parameter was ``controller`` and such a call raised ``TypeError``."""

from __future__ import annotations

import inspect
from typing import Any

import pytest

from actors.schedulers import (
    PB2,
    ASHAScheduler,
    Decision,
    FIFOScheduler,
    HyperBandScheduler,
    MedianStoppingRule,
    PopulationBasedTraining,
    PopulationBasedTrainingReplay,
    Scheduler,
)
from tests._fake_controller import Simulator

RAY_HOOKS = {
    "on_trial_add": ["tune_controller", "trial"],
    "on_trial_error": ["tune_controller", "trial"],
    "on_trial_result": ["tune_controller", "trial", "result"],
    "on_trial_complete": ["tune_controller", "trial", "result"],
    "on_trial_remove": ["tune_controller", "trial"],
    "choose_trial_to_run": ["tune_controller"],
}


@pytest.mark.parametrize("cls", [Scheduler, FIFOScheduler, ASHAScheduler, HyperBandScheduler, MedianStoppingRule,
                                 PopulationBasedTraining, PopulationBasedTrainingReplay, PB2])
def test_hook_parameters_have_rays_names(cls: type) -> None:
    for hook, names in RAY_HOOKS.items():
        assert list(inspect.signature(getattr(cls, hook)).parameters)[1:] == names, (cls.__name__, hook)


class KeywordASHA(ASHAScheduler):
    """Ray's docs' way of extending a scheduler: the base class's hooks called by keyword."""

    def on_trial_add(self, tune_controller: Any, trial: Any) -> None:
        super().on_trial_add(tune_controller=tune_controller, trial=trial)

    def on_trial_result(self, tune_controller: Any, trial: Any, result: dict[str, Any]) -> Any:
        return super().on_trial_result(tune_controller=tune_controller, trial=trial, result=result)

    def on_trial_complete(self, tune_controller: Any, trial: Any, result: dict[str, Any]) -> None:
        super().on_trial_complete(tune_controller=tune_controller, trial=trial, result=result)


def test_a_subclass_calling_the_hooks_by_keyword_decides_as_asha() -> None:
    def play(scheduler: ASHAScheduler) -> list[tuple[str, int, Decision]]:
        sim = Simulator(scheduler)
        for tid in "ABCD":
            sim.add(tid)
            sim.start(tid)
        for it in range(4):
            for n, tid in enumerate("ABCD"):
                if sim.ctl.status(tid).name == "RUNNING":
                    sim.report(tid, acc=n + it, done=it == 3)
        return sim.decisions

    kw = {"metric": "acc", "mode": "max", "max_t": 4, "grace_period": 1, "reduction_factor": 2}
    ours = play(KeywordASHA(**kw))  # type: ignore[arg-type]
    assert ours == play(ASHAScheduler(**kw))  # type: ignore[arg-type]
    assert Decision.STOP in [d for _, _, d in ours]  # (the play is one where ASHA stops some)


def test_set_search_properties_takes_rays_spec_keywords() -> None:
    """Ray's signature is ``set_search_properties(metric, mode, **spec)``: a ported scheduler passing its
    ``**spec`` on to the base class works (audition itself passes none: docs/coming-from-ray.md)."""

    class Ported(ASHAScheduler):
        def set_search_properties(self, metric: Any, mode: Any, **spec: Any) -> bool:
            return super().set_search_properties(metric, mode, **spec)

    sched = Ported()
    assert sched.set_search_properties("loss", "min", num_samples=4, stop={}, time_budget_s=None)
    assert (sched.metric, str(sched.mode)) == ("loss", "min")
    assert FIFOScheduler().set_search_properties("loss", "min", num_samples=4)
