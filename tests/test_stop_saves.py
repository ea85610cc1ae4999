"""A stop that asks for a save (``checkpoint_at_end``) and lands while the trainable computes.

The trial actor used to flag the stop at once, so the next ``report()`` (a class trainable's next step
boundary) unwound before the STOP command's save ran: the end checkpoint was dropped. A class trainable
now reports the step it was computing, then saves; a function trainable still ends at its next report
without reporting it (Ray stops it at once; Ray rejects ``checkpoint_at_end`` for function trainables).
"""

from __future__ import annotations

import datetime
import threading
import time
from typing import Any

import cloudpickle
from thespian.actors import ActorTypeDispatcher

from actors import CheckpointConfig, RunConfig, Stopper, Trainable, TuneConfig, Tuner, report
from actors._shell.trial_actor import TrialActor
from actors._worker.session import _get_session
from actors.messages import EndReason, ProbeDrain, ProbeForward, RunTrial, TrialEnded, TrialResults, TrialStop
from actors.schedulers import FIFOScheduler
from actors.schedulers._base import Decision
from actors.testing import ActorTestKit


def _wait_until_stopped(timeout_s: float = 10.0) -> None:
    """Block (as a long step would) until this trial's actor has been told to stop."""
    runner = _get_session("test")
    deadline = time.monotonic() + timeout_s
    while not runner.stop_requested:
        assert time.monotonic() < deadline, "the stop never reached the trial"
        time.sleep(0.005)


class CountsUntilStopped(Trainable):
    """Each step adds 1 to its state; step 3 lasts until the trial is told to stop."""

    def setup(self, config: dict[str, Any]) -> None:
        self.n = 0

    def step(self) -> dict[str, Any]:
        self.n += 1
        if self.n == 3:
            COMPUTING_STEP_3.set()
            _wait_until_stopped()
        return {"n": self.n}

    def save_checkpoint(self, checkpoint_dir: str) -> dict[str, Any]:
        return {"n": self.n}

    def load_checkpoint(self, checkpoint: Any) -> None:
        self.n = checkpoint["n"]


def reports_until_stopped(config: dict[str, Any]) -> None:
    report({"n": 1})
    report({"n": 2})
    _wait_until_stopped()
    report({"n": 3})  # the stop is known here: this one must not be reported
    report({"n": 4})


COMPUTING_STEP_3 = threading.Event()


class StopAllDuringStepThree(Stopper):
    """Stops every trial (on the controller's periodic check) once a trial computes its third step."""

    def __call__(self, trial_id: str, result: dict[str, Any]) -> bool:
        return False

    def stop_all(self) -> bool:
        return COMPUTING_STEP_3.is_set()


class StopsAtTwo(FIFOScheduler):
    """Stops a trial on its second result, and lets results be batched (the trial runs ahead)."""

    tolerates_batching = True

    def on_trial_result(self, controller: Any, trial: Any, result: dict[str, Any]) -> Decision:
        return Decision.STOP if result["training_iteration"] >= 2 else Decision.CONTINUE


def test_a_class_trainable_stopped_mid_step_still_saves_at_end(storage_dir, no_leaks) -> None:
    """A stop that does not come from the trial's own result (here a stopper's stop_all, checked on the
    controller's tick) lands while a step computes. With checkpoint_at_end audition saves then; Ray Tune
    saves at the end only for a stop decided on the trial's own result (docs/coming-from-ray.md)."""
    COMPUTING_STEP_3.clear()
    grid = Tuner(CountsUntilStopped, param_space={"x": 1},
                 tune_config=TuneConfig(metric="n", mode="max"),
                 run_config=RunConfig(name="stopsave", storage=storage_dir, verbose=0, system="simple",
                                      stop=StopAllDuringStepThree(),
                                      checkpoint_config=CheckpointConfig(checkpoint_at_end=True))).fit()
    r = grid[0]
    assert r.error is None
    # the step computing when the stop landed is reported, and the end checkpoint holds its state
    assert [h["training_iteration"] for h in r.metrics_history] == [1, 2, 3]
    assert r.checkpoint is not None, "checkpoint_at_end dropped by a stop that landed mid-step"
    assert r.checkpoint.to_dict()["n"] == 3


def _run(trainable: Any, storage: str) -> RunTrial:
    return RunTrial("t1", 1, {}, cloudpickle.dumps(trainable), None, 0, 0.0, 8, storage, {}, "exp", 0,
                    checkpoint_at_end=True)


class StopsOnResultTwo(ActorTypeDispatcher):
    """Plays the controller: starts the run, and stops it (with a save) as soon as result 2 arrives,
    while the trainable computes its next step (it waits for that stop)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.seen: list[Any] = []
        self.trial: Any = None

    def receiveMsg_ProbeForward(self, msg: ProbeForward, sender: Any) -> None:
        self.trial = msg.target
        self.send(msg.target, msg.message)

    def receiveMsg_ProbeDrain(self, msg: ProbeDrain, sender: Any) -> None:
        self.send(sender, tuple(self.seen))

    def receiveUnrecognizedMessage(self, msg: Any, sender: Any) -> None:
        self.seen.append(msg)
        if isinstance(msg, TrialResults) and msg.results[-1]["training_iteration"] == 2:
            self.send(self.trial, TrialStop("t1", 1, save=True))


def _stop_mid_step(trainable: Any, storage: str) -> tuple[TrialEnded, list[int]]:
    """Run with a window of 8 (no waiting for decisions), stopped with a save during step 3."""
    with ActorTestKit() as kit:
        controller, actor = kit.create(StopsOnResultTwo), kit.create(TrialActor)
        kit.send(controller, ProbeForward(actor, _run(trainable, storage)))
        deadline = time.monotonic() + 10
        seen: tuple[Any, ...] = ()
        while not any(isinstance(m, TrialEnded) for m in seen):
            assert time.monotonic() < deadline, f"the run did not end: {seen}"
            seen = kit.system.ask(controller, ProbeDrain(), datetime.timedelta(seconds=1)) or ()
        ended: TrialEnded = next(m for m in seen if isinstance(m, TrialEnded))
        return ended, [r["training_iteration"] for m in seen if isinstance(m, TrialResults) for r in m.results]


def test_trial_actor_saves_a_class_trainable_stopped_mid_step(tmp_path) -> None:
    ended, its = _stop_mid_step(CountsUntilStopped, str(tmp_path))
    assert ended.reason is EndReason.STOPPED
    assert its == [1, 2, 3]
    assert ended.checkpoint is not None and ended.checkpoint.iteration == 3


def test_trial_actor_ends_a_function_trainable_at_its_next_report(tmp_path) -> None:
    ended, its = _stop_mid_step(reports_until_stopped, str(tmp_path))
    assert ended.reason is EndReason.STOPPED
    assert its == [1, 2]  # the report after the stop unwinds before it is recorded
    assert ended.checkpoint is None
