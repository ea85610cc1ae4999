"""Seeded simulation scenarios for the engine's invariant tests: one seed picks the scheduler, the
faults, the experiment's size and the interleaving, so a failing seed reproduces exactly."""

from __future__ import annotations

import dataclasses
import random
from dataclasses import dataclass
from typing import Any

from actors import RunConfig, TuneConfig, search
from actors._driver.config import CheckpointConfig, FailureConfig
from actors.schedulers import (
    ASHAScheduler,
    FIFOScheduler,
    HyperBandScheduler,
    MedianStoppingRule,
    PopulationBasedTraining,
)
from actors.testing import Faults, simulate
from actors.testing.invariants import restore_violations, violations
from actors.testing.world import SIGKILL_CODE


def curve(config: dict[str, Any], i: int) -> dict[str, Any]:
    return {"loss": config["lr"] / i + 0.01 * i, "time_this_iter_s": config["step_s"]}


SPACE = {"lr": search.uniform(0.01, 1.0), "step_s": search.choice([0.5, 1.0, 1.5])}
# steps of several ticks: most of the controller's ticks are idle and the simulator skips them
LONG_STEPS = {"lr": search.uniform(0.01, 1.0), "step_s": search.choice([3.0, 7.0, 12.0])}
SCHEDULERS = ("fifo", "asha", "hyperband", "median", "pbt", "batching", "per-result")
# (name, may abort the experiment, Faults(...) arguments drawn from the seed's generator)
FAULTS = ("trials", "lost_exits", "poison", "scheduler", "storage", "checkpoint", "abort", "latency", "members")
ABORTING = {"scheduler", "storage", "checkpoint", "abort"}


class BatchingStopper(FIFOScheduler):
    """A deciding scheduler that lets trials run ahead (``tolerates_batching``): several of a trial's
    batches wait for their decisions at once. Stops a trial whose loss is still high at iteration 3."""

    tolerates_batching = True

    def on_trial_result(self, controller: Any, trial: Any, result: dict[str, Any]) -> Any:
        from actors.schedulers import Decision

        return Decision.STOP if result["training_iteration"] >= 3 and result["loss"] > 0.2 else Decision.CONTINUE


class EveryResult(FIFOScheduler):
    """Decides every result with no horizon, so trials ask it directly (actors/_engine/direct.py): stops
    a trial still bad at iteration 3, pauses a good one inside this hook at iteration 2 (Ray Tune's
    ``pause_trial(should_checkpoint=True)`` + NOOP hang), and stops another running trial that is far
    behind (a request about a trial other than the one being decided)."""

    tolerates_batching = False

    def __init__(self, pause_once: bool = False) -> None:
        super().__init__()
        # a trial without checkpoints starts over when it resumes, reaches iteration 2 again and would be
        # paused for ever (in Ray too): then each trial is paused once
        self.paused: set[str] | None = set() if pause_once else None

    def on_trial_result(self, controller: Any, trial: Any, result: dict[str, Any]) -> Any:
        from actors.schedulers import Decision

        it, loss = result["training_iteration"], result["loss"]
        if it == 2 and loss < 0.15 and (self.paused is None or trial.trial_id not in self.paused):
            if self.paused is not None:
                self.paused.add(trial.trial_id)
            controller.pause_trial(trial, should_checkpoint=True)
            return Decision.NOOP
        if it == 4:
            for other in controller.get_trials():
                if (other.trial_id != trial.trial_id and other.status.value == "RUNNING"
                        and other.last_result.get("loss", 0.0) > 3 * loss):
                    controller.stop_trial(other)
        return Decision.STOP if it >= 3 and loss > 0.3 else Decision.CONTINUE


def scheduler(name: str, max_t: int, checkpoints: bool = True) -> Any:
    if name == "batching":
        return BatchingStopper()
    if name == "per-result":
        return EveryResult(pause_once=not checkpoints)
    if name == "fifo":
        return FIFOScheduler()
    if name == "asha":
        return ASHAScheduler(max_t=max_t, grace_period=1, reduction_factor=2)
    if name == "hyperband":
        return HyperBandScheduler(max_t=max_t, reduction_factor=2)
    if name == "pbt-synch":  # (not in SCHEDULERS: its own sweep, so the pinned seeds keep their scenarios)
        return PopulationBasedTraining(time_attr="training_iteration", perturbation_interval=2, synch=True,
                                       hyperparam_mutations={"lr": search.uniform(0.01, 1.0)}, seed=0)
    if name == "pbt-every-step":  # (not in SCHEDULERS either: exploits at every step, half the trials each time)
        return PopulationBasedTraining(time_attr="training_iteration", perturbation_interval=1, quantile_fraction=0.5,
                                       hyperparam_mutations={"lr": search.uniform(0.01, 1.0)}, seed=0,
                                       resample_probability=0.5)
    if name == "median":
        return MedianStoppingRule(time_attr="training_iteration", grace_period=1, min_samples_required=2)
    return PopulationBasedTraining(time_attr="training_iteration", perturbation_interval=2,
                                   hyperparam_mutations={"lr": search.uniform(0.01, 1.0)}, seed=0,
                                   wait_for_checkpoint=True)


def draw_faults(kind: str, rng: random.Random) -> tuple[Faults, dict[str, Any]]:
    """The faults of one kind, and simulate()'s extra arguments they need (members)."""
    trial: dict[str, Any] = dict(trial_fail_p=0.04, trial_die_p=0.04)
    if kind == "trials":
        return Faults(**trial), {}
    if kind == "lost_exits":
        return Faults(trial_die_p=0.08, lost_exit_p=0.7), {}
    if kind == "poison":
        return Faults(poison_p=0.02, **trial), {}
    if kind == "scheduler":
        return Faults(scheduler_error_p=0.01, **trial), {}
    if kind == "storage":
        return Faults(storage_error_p=0.004), {}
    if kind == "checkpoint":
        return Faults(checkpoint_error_p=0.03, trial_die_p=0.03), {}
    if kind == "abort":
        return Faults(abort_at_s=rng.uniform(0.5, 8.0), trial_die_p=0.03), {}
    if kind == "latency":  # messages overtake each other by up to two steps
        return Faults(latency_s=(0.0, 2.0), **trial), {}
    members = {"m1": {"cpu": 2}, "m2": {"cpu": 2}}
    # back within the heartbeat timeout (5 s: a restart under the same id), after it, or never
    back = rng.choice([-1.0, 2.0, 40.0])
    return (Faults(member_loss=((rng.uniform(1.0, 6.0), "m1", back),), member_left_p=0.5, trial_die_p=0.02),
            {"members": members})


# every transport fault at once, on top of a scenario's own: half the trials' numbered messages lost on their
# first send, copies of a third, a fifth of all messages 5 s late, and latencies up to 1 s (messages overtake)
TRANSPORT: dict[str, Any] = {"lost_p": 0.5, "duplicate_p": 0.3, "straggler_p": 0.2, "latency_s": (0.0, 1.0)}


@dataclass(frozen=True)
class Scenario:
    seed: int
    scheduler: str
    faults: str
    num_samples: int
    max_iterations: int
    checkpoint_frequency: int
    checkpoint_at_end: bool
    max_failures: int
    # False: function trainables that never checkpoint (a pause, retry or restore starts a trial over)
    checkpoints: bool = True

    @property
    def may_abort(self) -> bool:
        return self.faults in ABORTING


def scenario(seed: int, schedulers: tuple[str, ...] = SCHEDULERS, kinds: tuple[str, ...] = FAULTS) -> Scenario:
    rng = random.Random(seed * 7919 + 1)
    sched = schedulers[seed % len(schedulers)]
    kind = kinds[(seed // len(schedulers)) % len(kinds)]
    pauses = sched in ("hyperband", "pbt", "pbt-synch", "pbt-every-step")  # (these need checkpoints to resume)
    ckpt = rng.choice([1, 2, 3]) if pauses else rng.choice([0, 1, 2, 3])
    at_end = rng.random() < 0.3
    sc = Scenario(seed, sched, kind, rng.randint(4, 6), rng.randint(5, 8), ckpt, at_end, rng.choice([-1, -1, -1, 3]))
    # a quarter of the seeds (drawn apart, so the other draws stay as they were): no checkpoints at all
    if random.Random(seed * 31 + 5).random() < 0.25:
        sc = dataclasses.replace(sc, checkpoint_frequency=0, checkpoint_at_end=False, checkpoints=False)
    return sc


def budget(seed: int) -> dict[str, Any]:
    """``run``'s and ``check``'s arguments for the time-budget sweep: a budget of 1-15 simulated seconds that ends
    the run mid-flight, and for a third of the seeds endless sampling (``num_samples=-1``) until it does."""
    return {"budget_s": random.Random(seed * 13 + 7).uniform(1.0, 15.0), "endless": seed % 3 == 0}


def concurrency(seed: int) -> dict[str, Any]:
    """``run``'s and ``check``'s arguments for the concurrency sweep: ``max_concurrent_trials`` of 1 or 2 (which
    also caps the generator's live trials, as Ray's does)."""
    return {"max_concurrent": random.Random(seed * 101 + 3).choice([1, 2])}


def run(sc: Scenario, faults: Faults | None = None, space: dict[str, Any] | None = None, duplicate_p: float = 0.0,
        lost_p: float = 0.0, transport: dict[str, Any] | None = None, budget_s: float | None = None,
        endless: bool = False, max_concurrent: int | None = None, **extra: Any) -> Any:
    """Simulate the scenario (``faults``: instead of the ones its kind draws; ``space``: instead of
    ``SPACE``; ``duplicate_p``, ``lost_p``: besides them, copies of the trials' numbered messages, and
    such messages lost on their first send: ``Faults.duplicate_p``, ``Faults.lost_p``; ``transport``:
    any other ``Faults`` fields to set besides, e.g. ``TRANSPORT``; ``budget_s``: a ``time_budget_s``;
    ``endless``: ``num_samples=-1``; ``max_concurrent``: ``max_concurrent_trials``)."""
    drawn, more = draw_faults(sc.faults, random.Random(sc.seed))
    f = faults or drawn
    if duplicate_p or lost_p:
        f = dataclasses.replace(f, duplicate_p=duplicate_p, lost_p=lost_p)
    if transport:
        f = dataclasses.replace(f, **transport)
    more = {"cpus": 3, **more, **extra}
    return simulate(curve, space or SPACE,
                    TuneConfig(metric="loss", mode="min", num_samples=-1 if endless else sc.num_samples,
                               time_budget_s=budget_s, max_concurrent_trials=max_concurrent,
                               scheduler=scheduler(sc.scheduler, sc.max_iterations, sc.checkpoints)),
                    RunConfig(checkpoint_config=CheckpointConfig(checkpoint_frequency=sc.checkpoint_frequency,
                                                                 checkpoint_at_end=sc.checkpoint_at_end),
                              failure_config=FailureConfig(max_failures=sc.max_failures)),
                    max_iterations=sc.max_iterations, seed=sc.seed, faults=f, checkpoints=sc.checkpoints, **more)


def over_held(core: Any) -> list[str]:
    """The members whose books hold more than they have (a size released wrong, or placed twice): none, ever."""
    return [f"{m.member_id} holds {m.used} of {m.resources}" for m in core.members.placement.members.values()
            if any(m.used.get(k, 0.0) > v + 1e-9 for k, v in m.resources.items())]


def check(sc: Scenario, **extra: Any) -> list[str]:
    """Simulate the scenario, check every invariant (restoring it if it was aborted), clean up. With a time budget
    (``budget_s``) the number of trials is the budget's, and no trial may be killed: a budget halts trials by
    stopping them, and with these steps (1.5 s at most) and these faults none may ignore its stop for the 10 s
    after which the controller kills it (a stop that reached a trial before its start was once dropped)."""
    sim = run(sc, **extra)
    again = None
    budgeted = extra.get("budget_s") is not None
    samples = None if budgeted else sc.num_samples
    try:
        problems = violations(sim, num_samples=samples, may_abort=sc.may_abort)
        if budgeted and extra.get("space") is None and not extra.get("transport"):
            problems += [f"trial process {pid} killed: it did not halt within trial_stop_grace_s of its stop"
                         for pid, code in sim.world.dead.items() if code == SIGKILL_CODE]
        if not problems and sim.error is not None:
            more, again = restore_violations(sim, curve, max_iterations=sc.max_iterations,
                                             num_samples=samples, seed=sc.seed, checkpoints=sc.checkpoints)
            problems += more
        return problems
    finally:
        sim.discard()
        if again is not None:
            again.discard()
