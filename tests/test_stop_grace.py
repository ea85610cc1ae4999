"""The grace-period kill (``RunConfig(trial_stop_grace_s)``, issue 13 item 4): a trial that ignores a
stop or a pause has its process killed while the rest of the experiment goes on, and ends as it was
asked to (TERMINATED, or PAUSED at its latest checkpoint), with no failure counted; on another member
the kill goes through that member's probe (``ProbeKill``)."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable

import pytest

from actors import Callback, FailureConfig, RunConfig, TuneConfig, Tuner
from actors._engine.trial import TrialStatus
from actors._process.children import pid_alive
from actors.search import grid_search
from tests import _stuck_trainables as S
from tests._cluster import fit_in_thread, listening, wait_for

GRACE_S = 1.0


def _tuner(d: str, storage_dir: str, action: str, **run) -> Tuner:
    return Tuner(S.stuck_or_working, param_space={"role": grid_search(["stuck", "work"]), "dir": d},
                 tune_config=TuneConfig(scheduler=S.HaltTheStuck(action)),
                 run_config=RunConfig(name=action, storage=storage_dir, verbose=0, trial_stop_grace_s=GRACE_S,
                                      **run))


def _see_the_stuck_trial_killed(d: str, fit: threading.Thread) -> float:
    """Wait for the stop (or pause) of the stuck trial, then for its process to be gone while
    ``fit`` still runs (the working trial only ends on ``release``); seconds from one to the other."""
    wait_for(lambda: os.path.exists(os.path.join(d, "stop-sent")), 60, "the stuck trial to be stopped")
    asked = time.monotonic()
    pid = S.read_pid(d, "stuck")
    assert pid is not None
    # the working trial may start after the stuck one was asked to halt (its actor placed late under load)
    wait_for(lambda: S.read_pid(d, "work") is not None, 60, "the working trial to start")
    work_pid = S.read_pid(d, "work")
    assert work_pid is not None
    wait_for(lambda: not pid_alive(pid), 30, f"the stuck trial's process {pid} to be killed")
    took = time.monotonic() - asked
    assert fit.is_alive() and pid_alive(work_pid), "the experiment ended before the kill was seen"
    return took


def _fit_and_kill(d: str, tuner: Tuner, before: Callable[[], None] = lambda: None) -> dict:
    out: dict = {}
    fit = fit_in_thread(tuner, out)
    try:
        before()
        took = _see_the_stuck_trial_killed(d, fit)
    finally:
        stuck = S.read_pid(d, "stuck")
        if stuck is not None and pid_alive(stuck):  # the test failed: end it here so fit() can end
            os.kill(stuck, signal.SIGKILL)
        open(os.path.join(d, "release"), "w").close()
        fit.join(timeout=60)
    assert not fit.is_alive(), "fit() did not finish"
    print(f"the stuck trial's process was gone {took:.1f}s after it was asked to halt (grace {GRACE_S}s)")
    assert "error" not in out, out.get("error")
    return {r.config["role"]: r for r in out["grid"]}


def _iterations(r) -> list[int]:
    return [h["training_iteration"] for h in r.metrics_history]


@pytest.mark.timeout(90)
def test_a_trial_that_ignores_its_stop_is_killed_while_the_run_goes_on(tmp_path, storage_dir, no_leaks):
    d = str(tmp_path)
    by_role = _fit_and_kill(d, _tuner(d, storage_dir, "stop"))
    stuck, work = by_role["stuck"], by_role["work"]
    assert stuck.status is TrialStatus.TERMINATED and stuck.num_failures == 0 and stuck.error is None
    assert _iterations(stuck) == [1, 2]
    assert work.status is TrialStatus.TERMINATED and work.num_failures == 0


@pytest.mark.timeout(90)
def test_a_pause_that_hangs_ends_paused_at_its_checkpoint_then_resumes(tmp_path, storage_dir, no_leaks):
    d = str(tmp_path)
    by_role = _fit_and_kill(d, _tuner(d, storage_dir, "pause"))
    stuck = by_role["stuck"]
    assert stuck.status is TrialStatus.TERMINATED and stuck.num_failures == 0 and stuck.error is None
    assert _iterations(stuck) == list(range(1, S.STUCK_STEPS + 1))  # contiguous, nothing twice
    # parked at the checkpoint of iteration 2 (step 1), the run after the kill restored it
    assert [h["restored_from"] for h in stuck.metrics_history] == [-1, -1, 1, 1]
    assert S.read_pid(d, "stuck-from-2") is not None
    assert by_role["work"].num_failures == 0


@pytest.mark.timeout(90)
def test_a_pause_from_another_trials_hook_of_a_trial_stuck_in_c_ends_paused_then_resumes(
        tmp_path, storage_dir, no_leaks):
    """pause_trial(stuck) from the working trial's hook, the stuck trial's last result already
    decided: no decision point is coming, so the pause is sent at once (as Ray's pause_trial) and
    the grace clock starts; the trial ends PAUSED at its checkpoint, then resumes."""
    d = str(tmp_path)
    # (wait_logged: the stuck trial blocks only once the controller logged its step-1 result, which this
    # scheduler, deciding each result with the trial itself, sees first; the pause then lands at its checkpoint)
    tuner = Tuner(S.stuck_or_working,
                  param_space={"role": grid_search(["stuck", "work"]), "dir": d, "wait_logged": True},
                  tune_config=TuneConfig(scheduler=S.PauseTheStuckFromAnother()),
                  run_config=RunConfig(name="pause-other", storage=storage_dir, verbose=0,
                                       trial_stop_grace_s=GRACE_S))
    by_role = _fit_and_kill(d, tuner)
    stuck = by_role["stuck"]
    assert stuck.status is TrialStatus.TERMINATED and stuck.num_failures == 0 and stuck.error is None
    assert _iterations(stuck) == list(range(1, S.STUCK_STEPS + 1))
    assert [h["restored_from"] for h in stuck.metrics_history] == [-1, -1, 1, 1]  # paused at step 1
    assert S.read_pid(d, "stuck-from-2") is not None
    assert by_role["work"].num_failures == 0


class _PidGoneWhenEnded(Callback):
    """On the driver, while fit() runs: was the stuck trial's process gone when the run ended? (A trial
    fail_fast stops gets no on_trial_complete, as in Ray 2.60: the experiment's end is where it shows.)"""

    def __init__(self, d: str) -> None:
        self.d = d
        self.gone: bool | None = None

    def on_experiment_end(self, trials: list, **info) -> None:
        if [str(t.status) for t in trials if t.config["role"] == "stuck"] == ["TERMINATED"]:
            pid = S.read_pid(self.d, "stuck")
            deadline = time.monotonic() + 10
            while pid is not None and pid_alive(pid) and time.monotonic() < deadline:
                time.sleep(0.05)
            self.gone = pid is not None and not pid_alive(pid)


@pytest.mark.timeout(90)
def test_fail_fast_kills_a_trial_stuck_in_c(tmp_path, storage_dir, no_leaks):
    """fail_fast=True ends the other trials 2 s after the failure: one stuck in C has its process
    killed then (it was only marked TERMINATED, its process running until shutdown), even with a
    long trial_stop_grace_s."""
    d = str(tmp_path)
    seen = _PidGoneWhenEnded(d)
    tuner = Tuner(S.stuck_or_failing, param_space={"role": grid_search(["stuck", "fail"]), "dir": d},
                  tune_config=TuneConfig(scheduler=S.SeeTheStuck()),
                  run_config=RunConfig(name="fail-fast", storage=storage_dir, verbose=0, callbacks=[seen],
                                       trial_stop_grace_s=60, failure_config=FailureConfig(fail_fast=True)))
    try:
        grid = tuner.fit()
    finally:
        pid = S.read_pid(d, "stuck")
        alive = pid is not None and pid_alive(pid)
        if alive:
            os.kill(pid, signal.SIGKILL)
    assert not alive, "the stuck trial's process outlived fit()"
    assert seen.gone, "the stuck trial ended TERMINATED while its process still ran"
    by_role = {r.config["role"]: r for r in grid}
    assert by_role["stuck"].status is TrialStatus.TERMINATED and by_role["stuck"].error is None
    assert by_role["fail"].status is TrialStatus.ERROR


@pytest.mark.timeout(150)
def test_a_stuck_trial_on_a_worker_is_killed_by_its_probe(cluster, tmp_path, storage_dir, no_leaks):
    d = str(tmp_path)
    tuner = _tuner(d, storage_dir, "stop", system=f"tcp://127.0.0.1:{cluster.port}", leader_runs_trials=False)

    def start_worker() -> None:
        wait_for(lambda: listening(cluster.port), 20, "the leader to listen")
        cluster.start_worker("a", cpus=2)

    by_role = _fit_and_kill(d, tuner, start_worker)
    stuck = by_role["stuck"]
    assert stuck.status is TrialStatus.TERMINATED and stuck.num_failures == 0 and stuck.error is None
    assert {h["member"] for r in by_role.values() for h in r.metrics_history} == {f"a-{cluster.tag}"}
    assert cluster.workers["a"].poll() is None  # killed by the probe, not by the end of its member
    cluster.stop()
