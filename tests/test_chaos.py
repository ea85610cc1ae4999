"""Chaos (issue 13, "Prove it stays fixed"): trial processes SIGKILLed and SIGSEGVed, the worker
crashed and restarted, storage stalled, all at random (seeded) while ~20 checkpointing trials run
on a leader and an ``audition worker``; then the experiment has ended, every history is 1..N once,
every retry resumed from the newest committed checkpoint and no process is left (tests/_chaos.py).

$AUDITION_CHAOS_SEEDS (a count or a list), $AUDITION_CHAOS_TRIALS, _STEPS and _FAULTS make it a
soak run; ``benchmarks/bench_chaos_soak.py`` runs many seeds and reports the counts.
"""

from __future__ import annotations

import glob
import os

import pytest

from actors import Checkpoint, FailureConfig, get_checkpoint, report
from actors._engine.trial import TrialStatus
from tests._chaos import ChaosConfig, ChaosRun, _kill_all, _wait, run_chaos, seeds_from_env


@pytest.mark.slow
@pytest.mark.timeout(240)
@pytest.mark.parametrize("seed", seeds_from_env())
def test_chaos_run_keeps_every_invariant(seed, tmp_path, no_leaks):
    report = run_chaos(ChaosConfig.from_env(seed), str(tmp_path))
    print(report.summary())
    assert not report.violations, report.summary()
    # the faults happened and hit trials (a run nothing disturbed would prove nothing)
    assert report.injected["worker_crash"] == 1
    assert report.injected["sigkill_trial"] + report.injected["sigsegv_trial"] >= 3
    assert report.failures >= 3 and report.resumes >= 1
    assert report.members["worker"] > 0, "no trial ran on the worker"


def held_answer(config: dict) -> None:
    """First run: iterations 1 and 2 checkpointed; the commit of iteration 3 lands in storage but its
    answer is held (the stall flag, set here), so its result never leaves. Later runs finish 1..5."""
    ckpt = get_checkpoint()
    start = ckpt.to_dict()["it"] if ckpt else 0
    for it in range(start + 1, 6):
        if ckpt is None and it == 3:
            with open(config["flag"], "w", encoding="ascii") as f:
                f.write("answer")
        report({"loss": 1.0, "it": it, "restored_from": start}, checkpoint=Checkpoint.from_dict({"it": it}))


@pytest.mark.slow
def test_a_lost_members_trial_resumes_from_the_commit_it_never_reported(tmp_path, no_leaks):
    """Found by the chaos run (seed 2): the controller fenced a lost member's trial before looking
    for checkpoints newer than the one it knew, so the retry ignored a committed one."""
    run = ChaosRun(ChaosConfig(seed=0, trials=1), str(tmp_path))
    held = os.path.join(run.storage.exp, "*", ".checkpoint_000002.audition_manifest.json")

    def crash_once_committed(alive) -> None:
        assert _wait(lambda: glob.glob(held) or not alive(), 30), "the third checkpoint was never committed"
        _kill_all(run.procs.worker())  # the machine dies with the commit unreported
        os.unlink(run.flag)
        run.start_worker()

    grid = run.fit(run.tuner(held_answer, {"flag": run.flag}, leader_runs_trials=False,
                             failure_config=FailureConfig(max_failures=2)), crash_once_committed)
    assert not run.report.violations, run.report.violations
    (result,) = list(grid)
    assert result.status is TrialStatus.TERMINATED and result.num_failures == 1, result.error
    assert [h["training_iteration"] for h in result.metrics_history] == [1, 2, 3, 4, 5]
    assert [h["restored_from"] for h in result.metrics_history] == [0, 0, 0, 3, 3]
