"""A trial that ignores a stop or a pause, for the grace-period kill tests (tests/test_stop_grace.py).

In its own module so an ``audition worker`` process imports it by reference.  Files in
``config["dir"]`` tell the test what happened: ``stuck.pid`` / ``work.pid`` (the trials' processes),
``seen`` (the scheduler has the stuck trial's last result), ``blocked`` (the stuck trial is past
its last ``report()``), ``stop-sent`` (the scheduler asked it to stop or pause), ``release``
(written by the test: the working trial may finish).

The stop or pause must reach the trial *outside* ``report()``: one that reaches it inside (a
trial waits there for each result's decision when results are not batched) ends it cooperatively.
"""

from __future__ import annotations

import ctypes
import json
import os
import time
from typing import Any

from actors import Checkpoint, get_checkpoint, get_context, report
from actors.schedulers import Decision, FIFOScheduler

STUCK_STEPS = 4


def write_pid(directory: str, name: str) -> None:
    tmp = os.path.join(directory, f".{name}.pid")
    with open(tmp, "w") as f:
        f.write(str(os.getpid()))
    os.replace(tmp, os.path.join(directory, f"{name}.pid"))  # never half-written


def read_pid(directory: str, name: str) -> int | None:
    try:
        with open(os.path.join(directory, f"{name}.pid")) as f:
            return int(f.read())
    except FileNotFoundError:
        return None


def _wait_file(path: str, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while not os.path.exists(path):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def _wait_logged(step: int, timeout_s: float) -> bool:
    """Wait until this trial's ``result.json`` (in its directory: local storage) holds ``step``."""
    path = os.path.join(get_context().get_trial_dir(), "result.json")
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            with open(path) as f:
                if any(json.loads(line).get("step") == step for line in f if line.strip()):
                    return True
        except (FileNotFoundError, ValueError):
            pass
        time.sleep(0.02)
    return False


def stuck_or_working(config: dict[str, Any]) -> None:
    """Role ``stuck``: checkpoints steps 0 and 1, then (first run only) blocks in a C call that
    holds the GIL, so its actor cannot even handle an exit request: only a kill ends it; a resumed
    run finishes the remaining steps.  Role ``work``: reports every 50 ms until ``release``."""
    d, role = config["dir"], config["role"]
    if role == "work":
        write_pid(d, role)
        for i in range(3000):
            report({"role": role, "i": i})
            if os.path.exists(os.path.join(d, "release")):
                return
            time.sleep(0.05)
        return
    ckpt = get_checkpoint()
    start = ckpt.to_dict()["step"] + 1 if ckpt else 0
    write_pid(d, role if ckpt is None else f"{role}-from-{start}")
    for step in range(start, STUCK_STEPS):
        report({"role": role, "step": step, "restored_from": start - 1},
               checkpoint=Checkpoint.from_dict({"step": step}))
        if step == 1 and ckpt is None:
            # the GIL held by the C call would keep this result in the process: wait until it is out,
            # at the scheduler ("seen"); with "wait_logged" also in the controller's log of the trial
            # (a scheduler deciding each result with the trial itself sees it before the controller)
            if _wait_file(os.path.join(d, "seen"), 60) and (not config.get("wait_logged") or _wait_logged(step, 60)):
                open(os.path.join(d, "blocked"), "w").close()
                ctypes.PyDLL(None).sleep(3600)


class HaltTheStuck(FIFOScheduler):
    """Decides STOP or PAUSE (``action``) on the stuck trial's result of step 1, once that trial is
    blocked past its ``report()``: results are batched (``tolerates_batching``), so the trial ran
    ahead and the decision reaches it outside ``report()``, as a slow decision does."""

    tolerates_batching = True

    def __init__(self, action: str) -> None:
        self.action = action

    def on_trial_result(self, controller: Any, trial: Any, result: dict[str, Any]) -> Decision:
        d = trial.config["dir"]
        if result.get("role") != "stuck" or result.get("step") != 1 or result.get("restored_from") != -1:
            return Decision.CONTINUE
        open(os.path.join(d, "seen"), "w").close()
        _wait_file(os.path.join(d, "blocked"), 60)
        open(os.path.join(d, "stop-sent"), "w").close()
        return Decision.STOP if self.action == "stop" else Decision.PAUSE


class PauseTheStuckFromAnother(FIFOScheduler):
    """Results one at a time (no batching): the stuck trial's result of step 1 is decided CONTINUE,
    so it is blocked in its own code with no decision pending; then the *working* trial's hook
    pauses it (``pause_trial(stuck)``), as a PBT-like scheduler pausing another trial does."""

    def __init__(self) -> None:
        self.paused = False

    def on_trial_result(self, controller: Any, trial: Any, result: dict[str, Any]) -> Decision:
        d = trial.config["dir"]
        if result.get("role") == "stuck" and result.get("step") == 1 and result.get("restored_from") == -1:
            open(os.path.join(d, "seen"), "w").close()
        elif (result.get("role") == "work" and not self.paused
              and os.path.exists(os.path.join(d, "blocked"))):
            stuck = [t for t in controller.get_trials() if t.config.get("role") == "stuck"]
            self.paused = True
            open(os.path.join(d, "stop-sent"), "w").close()
            controller.pause_trial(stuck[0], should_checkpoint=True)
        return Decision.CONTINUE


class SeeTheStuck(FIFOScheduler):
    """Only tells the stuck trial (``seen``) that its step-1 result reached the scheduler."""

    def on_trial_result(self, controller: Any, trial: Any, result: dict[str, Any]) -> Decision:
        if result.get("role") == "stuck" and result.get("step") == 1:
            open(os.path.join(trial.config["dir"], "seen"), "w").close()
        return Decision.CONTINUE


def stuck_or_failing(config: dict[str, Any]) -> None:
    """Role ``stuck`` as in :func:`stuck_or_working`; role ``fail`` raises once the stuck trial is
    blocked in its C call (for ``FailureConfig(fail_fast=True)``)."""
    d = config["dir"]
    if config["role"] == "stuck":
        stuck_or_working(config)
        return
    report({"role": "fail"})
    _wait_file(os.path.join(d, "blocked"), 60)
    raise RuntimeError("this trial fails on purpose so fail_fast stops the stuck one")
