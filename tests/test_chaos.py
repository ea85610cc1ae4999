"""Chaos (issue 13, "Prove it stays fixed"): trial processes SIGKILLed and SIGSEGVed, the worker
crashed and restarted, storage stalled, all at random (seeded) while ~20 checkpointing trials run
on a leader and an ``audition worker``; then the experiment has ended, every history is 1..N once,
every retry resumed from the newest committed checkpoint and no process is left (tests/_chaos.py).

$AUDITION_CHAOS_SEEDS (a count or a list), $AUDITION_CHAOS_TRIALS, _STEPS and _FAULTS make it a
soak run; ``benchmarks/bench_chaos_soak.py`` runs many seeds and reports the counts.
"""

from __future__ import annotations

import pytest

from tests._chaos import ChaosConfig, run_chaos, seeds_from_env


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
