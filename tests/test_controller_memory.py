"""What the controller keeps for a finished trial (benchmarks/bench_memory.py's target: < 5 KB a trial).

The records are read where they live: an in-process run keeps the controller in this process, and a
driver callback looks at its trial records when the experiment ends, before the actor system stops.
"""

from __future__ import annotations

import gc
from pathlib import Path
from typing import Any

from actors import Callback, RunConfig, TuneConfig, Tuner, report
from actors._engine.record import TrialRecord


def _train(config: dict[str, Any]) -> None:
    if config["n"]:
        report({"loss": float(config["n"])})
    else:
        raise RuntimeError("fails before its first result")


class _Records(Callback):
    def __init__(self) -> None:
        self.records: list[tuple[str, str, dict[str, Any], dict[str, Any], dict[str, Any]]] = []

    def on_experiment_end(self, trials: list[Any], **info: Any) -> None:
        ids = {t.trial_id for t in trials}  # (this experiment's: others' records may not be collected yet)
        self.records = [(r.trial_id, r.status.value, dict(r.started), dict(r.run_start), dict(r.last_result))
                        for r in gc.get_objects() if type(r) is TrialRecord and r.trial_id in ids]


def test_a_finished_trial_keeps_no_view_of_its_last_runs_start(tmp_path: Path) -> None:
    """Its process's auto-filled keys and the hooks' view of its start served that run only: its last
    result holds them (Result.metrics of a trial that failed before reporting shows them, as Ray's)."""
    seen = _Records()
    grid = Tuner(_train, param_space={"n": {"grid_search": [1, 2, 0]}},
                 tune_config=TuneConfig(reuse_actors=False),
                 run_config=RunConfig(name="mem", storage_path=str(tmp_path), verbose=0, system="simple",
                                      callbacks=[seen])).fit()
    assert len(seen.records) == 3
    for trial_id, status, started, run_start, last in seen.records:
        assert status in ("TERMINATED", "ERROR"), trial_id
        assert started == {} and run_start == {}, trial_id
        assert "pid" in last and "hostname" in last, trial_id  # folded into its last result at its end
    failed = [r for r in grid if r.error is not None]
    assert len(failed) == 1 and "pid" in failed[0].metrics and failed[0].metrics["config"] == {"n": 0}
