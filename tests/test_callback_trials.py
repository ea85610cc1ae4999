"""The ``trials`` list driver callbacks get holds every trial of the experiment, as Ray's does.

Ray 2.60 passes ``TuneController._trials``: every trial added so far, in the order added, PENDING ones
included; after ``Tuner.restore`` the saved trials come first (``_requeue_restored_trials``: most recent
result first), finished ones with their final status. It used to hold only the trials that had an event
in this run.
"""

from __future__ import annotations

from typing import Any

import pytest

from actors import Callback, RunConfig, TuneConfig, Tuner, report, with_resources
from actors._driver.callbacks import CallbackDispatcher
from actors._driver.config import default_cpus
from actors._driver.errors import TuneError
from actors._engine.trial import TrialSnapshot, TrialStatus
from actors.messages import EventType, TrialEvent, TrialEvents
from actors.search import grid_search
from tests import _trainables as T


def broken(config: dict[str, Any]) -> None:
    report({"loss": config["x"]})
    if config["x"] == 3:
        raise RuntimeError("bug in the trainable")
    report({"loss": config["x"] / 2})


def fixed(config: dict[str, Any]) -> None:
    report({"loss": config["x"]})
    report({"loss": config["x"] / 2})


fixed.__name__ = "broken"  # a fix keeps the name: Tuner.restore refuses another, as Ray 2.60


class Lists(Callback):
    """Records, per hook, the trials list as (x, status) pairs."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, list[tuple[int, str]]]] = []

    def _note(self, hook: str, trials: list[Any]) -> None:
        self.seen.append((hook, [(t.config["x"], str(t.status)) for t in trials]))

    def on_trial_start(self, trials: list[Any], **info: Any) -> None:
        self._note("start", trials)

    def on_trial_complete(self, trials: list[Any], **info: Any) -> None:
        self._note("complete", trials)

    def on_experiment_end(self, trials: list[Any], **info: Any) -> None:
        self._note("end", trials)


def _one_at_a_time(trainable: Any) -> Any:
    """Each trial takes every CPU, so they run one after another while all are created up front
    (``max_concurrent_trials=1`` would also make Ray's generator create them one at a time)."""
    return with_resources(trainable, {"cpu": default_cpus()})


def _run(storage: str, trainable: Any, cb: Callback | None = None) -> Any:
    return Tuner(_one_at_a_time(trainable), param_space={"x": grid_search([1, 2, 3])},
                 tune_config=TuneConfig(metric="loss", mode="min"),
                 run_config=RunConfig(name="lists", storage=storage, verbose=0, system="simple",
                                      callbacks=[cb] if cb else None)).fit()


def test_after_restore_the_list_holds_the_trials_that_finished_before(storage_dir) -> None:
    first = _run(storage_dir, broken)
    assert first.num_errors == 1
    cb = Lists()
    Tuner.restore(first.experiment_path, fixed, resume_errored=True, callbacks=[cb]).fit()
    # the trials ran one after another: the most recent result first (Ray's restore order)
    assert cb.seen[0] == ("start", [(3, "PENDING"), (2, "TERMINATED"), (1, "TERMINATED")])
    assert cb.seen[-1] == ("end", [(3, "TERMINATED"), (2, "TERMINATED"), (1, "TERMINATED")])


def test_the_end_list_holds_trials_that_never_started(storage_dir) -> None:
    """A failing scheduler aborts the run after the first result: the other two trials never start
    and have no event, yet on_experiment_end lists them (the controller's final table)."""
    cb = Lists()
    with pytest.raises(TuneError, match="Exploding raised"):
        Tuner(_one_at_a_time(fixed), param_space={"x": grid_search([3, 1, 2])},
              tune_config=TuneConfig(metric="loss", mode="min", scheduler=T.Exploding()),
              run_config=RunConfig(name="fast", storage=storage_dir, verbose=0, system="simple",
                                   callbacks=[cb])).fit()
    assert cb.seen[0] == ("start", [(3, "PENDING"), (1, "PENDING"), (2, "PENDING")])  # every trial, as Ray
    hook, trials = cb.seen[-1]
    assert hook == "end" and [x for x, _ in trials] == [3, 1, 2]


def test_pending_trials_are_in_the_list_before_they_start(storage_dir) -> None:
    cb = Lists()
    _run(storage_dir, fixed, cb)
    # Ray's BasicVariantGenerator adds up to 200 pending trials at once: all three are listed
    assert cb.seen[0] == ("start", [(1, "PENDING"), (2, "PENDING"), (3, "PENDING")])


def test_an_add_event_lists_the_trial_without_calling_a_hook() -> None:
    cb = Lists()
    d = CallbackDispatcher([cb])

    def snap(x: int, status: TrialStatus) -> TrialSnapshot:
        return TrialSnapshot(f"t_{x:05d}", {"x": x}, status)

    d.push(TrialEvents(1, (TrialEvent(EventType.ADD, snap(1, TrialStatus.PENDING)),
                           TrialEvent(EventType.ADD, snap(2, TrialStatus.PENDING)))))
    assert cb.seen == [] and d.iteration == 0
    d.push(TrialEvents(2, (TrialEvent(EventType.START, snap(1, TrialStatus.RUNNING)),)))
    assert cb.seen == [("start", [(1, "PENDING"), (2, "PENDING")])] and d.iteration == 1


def test_a_checkpoint_request_is_answered_with_its_batch_and_never_carried_into_another_run() -> None:
    """A callback's should_checkpoint on any result of a held batch is answered with the batch's last
    result; one on a result nobody holds (its run ended before the decision) dies with that run."""
    from actors import Callback
    from actors.messages import CallbackAnswer

    class AskAtTwo(Callback):
        def on_trial_result(self, iteration: int, trials: Any, trial: Any, result: dict[str, Any]) -> None:
            if result["training_iteration"] == 2:
                result["should_checkpoint"] = True

    d = CallbackDispatcher([AskAtTwo()])
    answers: list[CallbackAnswer] = []
    d.answer = answers.append
    snap = TrialSnapshot("t_00001", {"x": 1}, TrialStatus.RUNNING)

    def result(i: int, batch: int = 0, run: int = 1) -> TrialEvent:
        return TrialEvent(EventType.RESULT, snap, {"training_iteration": i}, answer_run=run if batch else 0,
                          answer_batch=batch)

    d.push(TrialEvents(1, (TrialEvent(EventType.START, snap), result(1), result(2), result(3, batch=1))))
    assert answers == [CallbackAnswer("t_00001", 1, 1, True)], "asked at 2, answered with the batch's last"
    d.push(TrialEvents(2, (result(4, batch=2),)))
    assert answers[-1] == CallbackAnswer("t_00001", 1, 2, False), "answered once"
    d.push(TrialEvents(3, (result(2), TrialEvent(EventType.ERROR, snap))))  # unheld: the run ended undecided
    d.push(TrialEvents(4, (TrialEvent(EventType.START, snap), result(1, batch=1, run=2))))
    assert answers[-1] == CallbackAnswer("t_00001", 2, 1, False), "not carried into the retry"


def _one(config: dict[str, Any]) -> None:
    report({"x": 1})


class Sizes(Callback):
    """What Ray's ``trial.placement_group_factory`` says at each result and at the end."""

    def __init__(self) -> None:
        self.seen: list[tuple[Any, ...]] = []

    def on_trial_result(self, iteration: int, trials: list[Any], trial: Any, result: dict[str, Any],
                        **info: Any) -> None:
        pgf = trial.placement_group_factory
        self.seen.append(("result", trial.config["n"], pgf.required_resources, pgf.bundles))

    def on_trial_complete(self, iteration: int, trials: list[Any], trial: Any, **info: Any) -> None:
        self.seen.append(("complete", trial.config["n"], trial.placement_group_factory.required_resources))


@pytest.mark.parametrize(("resources", "cpus"), [({"cpu": 2}, {1: 2.0, 2: 2.0}),
                                                  (lambda c: {"CPU": c["n"]}, {1: 1.0, 2: 2.0})])
def test_callbacks_and_analysis_trials_carry_rays_placement_group_factory(resources: Any, cpus: dict[int, float],
                                                                          tmp_path: Any) -> None:
    # recorded from Ray 2.60 (with_resources(train, {"cpu": 2}) and lambda c: {"CPU": c["n"]}, grid n = 1, 3):
    # at each result and at the end, required_resources {'CPU': 2.0} for both, or {'CPU': n}; bundles [that];
    # ExperimentAnalysis(path).trials the same. (Here n = 1, 2: this machine may have 2 CPUs.)
    from actors import ExperimentAnalysis

    cb = Sizes()
    grid = Tuner(with_resources(_one, resources), param_space={"n": grid_search([1, 2])},
                 run_config=RunConfig(storage=str(tmp_path), callbacks=[cb], system="simple", verbose=0)).fit()
    assert sorted(cb.seen, key=str) == sorted(
        [("result", n, {"CPU": c}, [{"CPU": c}]) for n, c in cpus.items()]
        + [("complete", n, {"CPU": c}) for n, c in cpus.items()], key=str)
    analysis = ExperimentAnalysis(grid.experiment_path)
    assert sorted((t.config["n"], t.placement_group_factory.required_resources) for t in analysis.trials) == [
        (n, {"CPU": c}) for n, c in sorted(cpus.items())]


def test_tune_runs_trials_carry_the_default_placement_group_factory(tmp_path: Any) -> None:
    # recorded from Ray 2.60: tune.run(train, ...) without resources: [{'CPU': 1.0}], strategy PACK
    import actors

    a = actors.run(_one, config={"n": grid_search([1])}, storage_path=str(tmp_path), system="simple", verbose=0)
    (pgf,) = [t.placement_group_factory for t in a.trials]
    assert (pgf.bundles, pgf.strategy) == ([{"CPU": 1.0}], "PACK")
