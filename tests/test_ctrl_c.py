"""Ctrl-C (SIGINT) in the driver, as Ray Tune 2.60 ends the run, then ``Tuner.restore``.

Recorded from Ray 2.60 with this scenario (a function trainable reporting and checkpointing every 0.3 s for 20
steps, here 0.2 s for 5; grid x in 0..3 through a ``BasicVariantGenerator(max_concurrent=2)`` subclass, a
FIFOScheduler subclass and a callback logging their hooks; the parent sent SIGINT once the callback saw the
third result): no ``on_trial_complete``/``on_trial_error`` of the callback, the scheduler (nor
``on_trial_remove``) or the searcher; ``on_experiment_end`` with trials x=0 and x=1 both TERMINATED; ``fit()``
returned a ResultGrid of those two (TERMINATED, no error, ``done`` False, their latest checkpoint), the driver
exited 0 after warning the experiment was interrupted; the experiment state held both RUNNING.
``Tuner.restore(path, train).fit()`` (``resume_unfinished`` defaults to True) resumed both from their latest
checkpoint, then ran x=2 and x=3; every trial ended TERMINATED with the hooks of a normal end.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from typing import Any

import pytest

from tests._cluster import wait_for
from tests._driver_script import end_driver, processes_with

SCRIPT = os.path.join(os.path.dirname(__file__), "_ctrl_c_driver.py")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _lines(path: str) -> list[dict[str, Any]]:
    with open(path) as f:
        return [json.loads(line) for line in f]


def _start(where: str, storage: str, mode: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, SCRIPT, where, storage, mode], env=dict(os.environ, PYTHONPATH=ROOT),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_ctrl_c_ends_the_run_as_ray_then_restore_resumes_it(tmp_path: Any) -> None:
    where, storage = str(tmp_path), str(tmp_path / "res")
    proc = _start(where, storage, "fresh")
    try:
        wait_for(lambda: os.path.exists(os.path.join(where, "third_result")), 60, "the third result")
        open(os.path.join(where, "signalled"), "w").close()
        proc.send_signal(signal.SIGINT)
        _out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err[-3000:]
        assert "interrupted (Ctrl-C)" in err and "Tuner.restore(" in err, err[-3000:]
        wait_for(lambda: not processes_with(SCRIPT, storage), 20, "every process of the run to end")
    finally:
        end_driver(proc, SCRIPT, storage)
    log = _lines(os.path.join(where, "log_fresh.jsonl"))
    hooks = [line["hook"] for line in log]
    # as Ray 2.60: no hook hears of the interrupted trials' end
    assert not [h for h in hooks if h.startswith(("sched.", "search.")) or h in (
        "cb.on_trial_complete", "cb.on_trial_error")], hooks
    # the trials did end before the run did (the scheduler's state waited for it): a hook told of them would show
    assert all(os.path.exists(os.path.join(where, f"stopped_{x}")) for x in (0, 1))
    assert hooks[-2:] == ["cb.on_experiment_end", "fit returned"], hooks
    assert log[-2]["trials"] == [[0, "TERMINATED"], [1, "TERMINATED"]]
    results = log[-1]["results"]
    assert [r[:2] + r[3:5] for r in results] == [[0, "TERMINATED", False, False], [1, "TERMINATED", False, False]]
    assert all(r[5] == r[2] for r in results), results  # each one's latest checkpoint: its last step
    # the state written keeps them unfinished, so a restore resumes them
    pointer = json.load(open(f"{storage}/e/experiment_state.json"))
    state = json.load(open(f"{storage}/e/.state/{pointer['latest']}"))
    assert [t["status"] for t in state["trials"]] == ["RUNNING", "RUNNING"]

    proc = _start(where, storage, "restore")
    try:
        _out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err[-3000:]
        wait_for(lambda: not processes_with(SCRIPT, storage), 20, "every process of the run to end")
    finally:
        end_driver(proc, SCRIPT, storage)
    log = _lines(os.path.join(where, "log_restore.jsonl"))
    first = {}
    for line in log:
        if line["hook"] == "cb.on_trial_result":
            first.setdefault(line["x"], line)
    # x=0 and x=1 go on from the checkpoint the interrupted run returned; x=2 and x=3 start afresh
    assert {x: first[x]["start"] for x in range(4)} == {0: results[0][5], 1: results[1][5], 2: 0, 3: 0}
    assert sorted(line["x"] for line in log if line["hook"] == "cb.on_trial_complete") == [0, 1, 2, 3]
    assert sorted(line["x"] for line in log if line["hook"] == "sched.on_trial_complete") == [0, 1, 2, 3]
    assert len([line for line in log if line["hook"] == "search.on_trial_complete"]) == 4
    assert sorted(r[:5] for r in log[-1]["results"]) == [[x, "TERMINATED", 5, True, False] for x in range(4)]


def test_the_grid_after_ctrl_c_lists_the_unfinished_trials_terminated() -> None:
    """Ray's cleanup after Ctrl-C stops every trial (TERMINATED) once the state kept them unfinished:
    the controller's last word may still list a trial RUNNING or PENDING (its stop had not landed)."""
    from actors._driver.interrupt import ended_by_ctrl_c
    from actors._engine.trial import TrialStatus
    from actors.messages import ExperimentFinished, TrialSummary

    def summary(i: int, status: TrialStatus) -> TrialSummary:
        return TrialSummary(f"t{i}", {"x": i}, status, {}, None, None, 0, f"/p/t{i}")

    given = [TrialStatus.RUNNING, TrialStatus.PENDING, TrialStatus.PAUSED, TrialStatus.ERROR, TrialStatus.TERMINATED]
    got = ended_by_ctrl_c(ExperimentFinished(tuple(summary(i, s) for i, s in enumerate(given)),
                                             "interrupted (Ctrl-C or SIGTERM)", 1.0), "/p")
    assert got.error is None
    assert [t.status for t in got.trials] == [TrialStatus.TERMINATED] * 3 + [TrialStatus.ERROR, TrialStatus.TERMINATED]
