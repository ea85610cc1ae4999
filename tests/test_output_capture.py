"""A trial's stdout/stderr land in ``stdout.txt``/``stderr.txt`` of its trial directory, across runs."""

from __future__ import annotations

import os
import sys
import threading
import traceback
from typing import Any

import pytest

from actors import Checkpoint, FailureConfig, RunConfig, TuneConfig, Tuner, _capture, get_checkpoint, report
from actors._capture import OutputCapture
from actors._trial import TrialStatus
from storage import StorageContext
from tests import _trainables as T


def printing_fn(config: dict[str, Any]) -> None:
    """Prints from each run; fails once after its first checkpoint so the retry appends."""
    ckpt = get_checkpoint()
    run = "retry" if ckpt else "first"
    start = ckpt.to_dict()["step"] + 1 if ckpt else 0
    print(f"fn-out {run} start={start}")
    sys.stderr.write(f"fn-err {run}\n")
    for step in range(start, 3):
        print(f"fn-out step={step}", flush=True)
        report({"loss": 1.0 / (step + 1)}, checkpoint=Checkpoint.from_dict({"step": step}))
        if step == 0 and ckpt is None:
            try:
                raise KeyError("printed, not raised")
            except KeyError:
                traceback.print_exc()
            raise ValueError("fail once")


class PrintingClass(T.ClassTrainable):
    def setup(self, config: dict[str, Any]) -> None:
        super().setup(config)
        print("cls-out setup")
        print("cls-err setup", file=sys.stderr)

    def step(self) -> dict[str, Any]:
        out = super().step()
        print(f"cls-out step={self.step_no} restored_from={self.restored_from}")
        return out


def _read(trial_dir: str, name: str) -> str:
    with open(os.path.join(trial_dir, name), encoding="utf-8") as f:
        return f.read()


def test_function_trial_output_is_captured_and_appended_by_the_retry(storage_dir, no_leaks, capfd) -> None:
    grid = Tuner(printing_fn, tune_config=TuneConfig(metric="loss", mode="min"),
                 run_config=RunConfig(name="out_fn", storage=storage_dir, system="multiproc", verbose=0,
                                      failure_config=FailureConfig(max_failures=1))).fit()
    r = grid[0]
    assert r.status is TrialStatus.TERMINATED and r.num_failures == 1
    trial_dir = os.path.join(storage_dir, "out_fn", r.trial_id)
    out, err = _read(trial_dir, "stdout.txt"), _read(trial_dir, "stderr.txt")
    assert out.splitlines() == ["fn-out first start=0", "fn-out step=0",
                                "fn-out retry start=1", "fn-out step=1", "fn-out step=2"], out
    assert "fn-err first" in err and "fn-err retry" in err
    assert err.index("fn-err first") < err.index("fn-err retry")
    assert "KeyError: 'printed, not raised'" in err  # traceback.print_exc() goes to stderr
    assert "ValueError: fail once" in err  # so does the traceback of the failure itself
    seen = capfd.readouterr()
    assert "fn-out" not in seen.out and "fn-err" not in seen.err  # nothing reached the terminal


@pytest.mark.parametrize("system", ["simple", "multiproc"])
def test_class_trial_output_is_appended_across_pause_and_resume(system, storage_dir, no_leaks, capfd) -> None:
    grid = Tuner(PrintingClass, param_space={"steps": 4},
                 tune_config=TuneConfig(metric="loss", mode="min", scheduler=T.PauseFromHook(at=2)),
                 run_config=RunConfig(name="out_cls", storage=storage_dir, system=system, verbose=0)).fit()
    r = grid[0]
    assert r.status is TrialStatus.TERMINATED
    assert r.metrics_history[2]["restored_from"] == 1  # it really paused and resumed
    trial_dir = os.path.join(storage_dir, "out_cls", r.trial_id)
    assert _read(trial_dir, "stdout.txt").splitlines() == [
        "cls-out setup", "cls-out step=1 restored_from=-1", "cls-out step=2 restored_from=-1",
        "cls-out setup", "cls-out step=3 restored_from=1", "cls-out step=4 restored_from=1",
    ]
    assert _read(trial_dir, "stderr.txt").splitlines() == ["cls-err setup", "cls-err setup"]
    seen = capfd.readouterr()
    assert "cls-out" not in seen.out and "cls-err" not in seen.err


def test_other_threads_pass_through_and_object_stores_are_rewritten_whole(capfd) -> None:
    ctx = StorageContext("memory://capture-test")
    paths = {"stdout": ctx.join("t", "stdout.txt"), "stderr": ctx.join("t", "stderr.txt")}
    ctx.fs.pipe_file(paths["stdout"], b"earlier run\n")
    cap = OutputCapture(ctx, paths)
    original = sys.stdout
    cap.start()
    try:
        other = threading.Thread(target=lambda: print("from another thread"))
        other.start()
        other.join()
        print("mine")
        cap.flush()
        print("more")
        cap.flush()
    finally:
        cap.stop()
    # restored, unless a trial thread of an earlier test in this process still captures
    assert sys.stdout is original or _capture._routes
    print("after stop")
    assert ctx.fs.cat_file(paths["stdout"]) == b"earlier run\nmine\nmore\n"
    assert not ctx.fs.exists(paths["stderr"])  # nothing written, no file
    seen = capfd.readouterr().out
    assert "from another thread" in seen and "after stop" in seen
