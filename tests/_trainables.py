"""Trainables and schedulers shared by the end-to-end tests."""

from __future__ import annotations

import os
import signal
import time
from typing import Any

from actors import Checkpoint, Trainable, get_checkpoint, report
from actors.schedulers import Decision, FIFOScheduler
from actors.stopper import Stopper

STEPS = 6


def fn_trainable(config: dict[str, Any]) -> None:
    """Counts steps; records where it restarted from so tests can see resumes."""
    ckpt = get_checkpoint()
    start = ckpt.to_dict()["step"] + 1 if ckpt else 0
    for step in range(start, config.get("steps", STEPS)):
        if config.get("slow_save"):
            time.sleep(config["slow_save"])
        # wall: when it reported, to the microsecond (Ray's timestamp, in every result, is whole seconds)
        report({"loss": config.get("x", 1.0) / (step + 1), "step": step, "restored_from": start - 1,
                "wall": time.time()}, checkpoint=Checkpoint.from_dict({"step": step}))


def sized_trainable(config: dict[str, Any]) -> None:
    """``fn_trainable`` that also reports the CPUs its trial was given (``get_trial_resources()``): a resizing
    scheduler's trials show their sizes."""
    from actors import get_context

    ckpt = get_checkpoint()
    start = ckpt.to_dict()["step"] + 1 if ckpt else 0
    for step in range(start, config.get("steps", STEPS)):
        time.sleep(config.get("slow_save", 0.0))
        cpus = get_context().get_trial_resources().required_resources["CPU"]
        report({"loss": config.get("x", 1.0) / (step + 1), "step": step, "cpus": cpus, "wall": time.time()},
               checkpoint=Checkpoint.from_dict({"step": step}))


class AtMostTwoCpus:
    """Ray's default allocation (``DistributeResources``) capped at 2 CPUs: one member's size in the tests' clusters."""

    def __call__(self, tune_controller: Any, trial: Any, result: dict[str, Any], scheduler: Any) -> Any:
        from actors import PlacementGroupFactory
        from actors.schedulers.resource_changing_scheduler import DistributeResources

        new = DistributeResources()(tune_controller, trial, result, scheduler)
        return None if new is None else PlacementGroupFactory([{"CPU": min(2.0, new.required_resources["CPU"])}])


def gated_trainable(config: dict[str, Any]) -> None:
    """Reports every 50 ms until the file ``config["gate"]`` exists (at most 120 s): a trial that is surely still
    running while a test looks at the experiment."""
    deadline = time.monotonic() + 120.0
    step = 0
    while not os.path.exists(config["gate"]) and time.monotonic() < deadline:
        report({"loss": config.get("x", 1.0) / (step + 1), "step": step})
        step += 1
        time.sleep(0.05)


class ClassTrainable(Trainable):
    def setup(self, config: dict[str, Any]) -> None:
        self.step_no = 0
        self.restored_from = -1

    def step(self) -> dict[str, Any]:
        self.step_no += 1
        done = self.step_no >= self.config.get("steps", STEPS)
        return {"loss": self.config.get("x", 1.0) / self.step_no, "step": self.step_no - 1,
                "restored_from": self.restored_from, "done": done}

    def save_checkpoint(self, checkpoint_dir: str) -> dict[str, Any]:
        if self.config.get("slow_save"):
            time.sleep(self.config["slow_save"])
        with open(os.path.join(checkpoint_dir, "state.txt"), "w") as f:
            f.write(str(self.step_no))
        return None  # type: ignore[return-value]

    def load_checkpoint(self, checkpoint: Any) -> None:
        with open(os.path.join(checkpoint, "state.txt")) as f:
            self.step_no = int(f.read())
        self.restored_from = self.step_no - 1


def killer(config: dict[str, Any]) -> None:
    """SIGKILLs its own process at step 3 of its first run (after checkpointing step 3)."""
    ckpt = get_checkpoint()
    start = ckpt.to_dict()["step"] + 1 if ckpt else 0
    for step in range(start, 6):
        report({"loss": 1.0 / (step + 1), "step": step, "restored_from": start - 1},
               checkpoint=Checkpoint.from_dict({"step": step}))
        if step == 3 and ckpt is None and config.get("kill"):
            os.kill(os.getpid(), signal.SIGKILL)


def raiser(config: dict[str, Any]) -> None:
    report({"loss": 1.0})
    if config.get("fail"):
        raise ValueError("bad hyperparameter: fail=True")
    report({"loss": 0.5})


class PauseFromHook(FIFOScheduler):
    """The Ray Tune hang: pause_trial(should_checkpoint=True) inside on_trial_result, then NOOP."""

    def __init__(self, at: int = 2) -> None:
        self.at = at
        self.paused: set[str] = set()

    def on_trial_result(self, controller: Any, trial: Any, result: dict[str, Any]) -> Decision:
        if result["training_iteration"] == self.at and trial.trial_id not in self.paused:
            self.paused.add(trial.trial_id)
            controller.pause_trial(trial, should_checkpoint=True)
            controller.pause_trial(trial, should_checkpoint=True)  # twice: harmless
        return Decision.NOOP


class PauseOnce(FIFOScheduler):
    """Pauses each trial once, at its result ``at``: a decision that does not depend on timing."""

    def __init__(self, at: int = 2) -> None:
        super().__init__()
        self.at = at
        self.paused: set[str] = set()

    def on_trial_result(self, controller: Any, trial: Any, result: dict[str, Any]) -> Decision:
        if result["training_iteration"] == self.at and trial.trial_id not in self.paused:
            self.paused.add(trial.trial_id)
            return Decision.PAUSE
        return Decision.CONTINUE


class PauseEveryResult(FIFOScheduler):
    """Ray's "frequent pausing" release test: PAUSE on every single result."""

    def on_trial_result(self, controller: Any, trial: Any, result: dict[str, Any]) -> Decision:
        return Decision.PAUSE


class StopDuringSave(FIFOScheduler):
    """Pauses trial 'a' with a (slow) checkpoint; trial 'b' then stops 'a' while the save is in flight."""

    def __init__(self) -> None:
        self.pausing: str | None = None
        self.stopped = False

    def on_trial_result(self, controller: Any, trial: Any, result: dict[str, Any]) -> Decision:
        if trial.config.get("role") == "a" and result["training_iteration"] == 2 and self.pausing is None:
            self.pausing = trial.trial_id
            controller.pause_trial(trial, should_checkpoint=True)
        elif trial.config.get("role") == "b" and self.pausing and not self.stopped:
            self.stopped = True
            target = next(t for t in controller.get_trials() if t.trial_id == self.pausing)
            controller.stop_trial(target)
            controller.pause_trial(target, should_checkpoint=True)  # lower: must not downgrade STOP
        return Decision.NOOP


class Exploding(FIFOScheduler):
    def on_trial_result(self, controller: Any, trial: Any, result: dict[str, Any]) -> Decision:
        raise RuntimeError("scheduler bug")


def b_reporter(config: dict[str, Any]) -> None:
    """Role 'b' reports steadily for a while; role 'a' runs fn_trainable with a slow save."""
    if config.get("role") == "a":
        return fn_trainable(config)
    for i in range(40):
        time.sleep(0.02)
        report({"loss": 1.0, "i": i})


class RoleTrainable(Trainable):
    """Role 'a': fast steps, a slow save (0.5 s); role 'b': 40 steps of 20 ms."""

    def setup(self, config: dict[str, Any]) -> None:
        self.n = 0

    def step(self) -> dict[str, Any]:
        self.n += 1
        if self.config["role"] == "b":
            time.sleep(0.02)
            return {"loss": 1.0, "done": self.n >= 40}
        return {"loss": 1.0, "done": self.n >= 6}

    def save_checkpoint(self, checkpoint_dir: str) -> None:
        time.sleep(0.5)
        with open(os.path.join(checkpoint_dir, "n"), "w") as f:
            f.write(str(self.n))

    def load_checkpoint(self, checkpoint: Any) -> None:
        with open(os.path.join(checkpoint, "n")) as f:
            self.n = int(f.read())


class PerResultFIFO(FIFOScheduler):
    """FIFO that decides on every result (no batching): report() returns only once scheduled."""

    tolerates_batching = False


class StopAllAfter(Stopper):
    """A stopper whose ``stop_all()`` turns true once ``n`` results came in, from whichever trials: the
    trials then running or waiting are stopped from outside their own results."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.seen = 0

    def __call__(self, trial_id: str, result: dict[str, Any]) -> bool:
        self.seen += 1
        return False

    def stop_all(self) -> bool:
        return self.seen >= self.n
