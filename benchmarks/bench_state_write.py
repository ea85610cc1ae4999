"""What one experiment-state write costs the controller, and what share of its time the writes take.

The controller snapshots its trial table and writes it (with the scheduler's state) about once a
second (``ExperimentSpec.state_interval_s``), and soon after a trial pauses, stops or finishes. The
write is O(trials): each row is built and the whole state encoded to JSON. This measures, for
states of ``--trials`` rows (each a finished trial with a 20-key last result and a checkpoint, as a
real run's), the snapshot + write on local disk through the real ``ExperimentIO``, and the share of
the controller's time that states written back to back at ``ExperimentIO.state_due``'s spacing take:
``cost / max(spacing, cost)`` where the spacing is the wait ``state_due`` asks after a write of that
cost when nothing else is due (one write a ``state_interval_s`` in a run where results arrive).
Prints one JSON line.

    python benchmarks/bench_state_write.py [--trials 100,1000,5000,20000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import pickle
import statistics
import tempfile
import time
from typing import Any

import _common


def one_size(n: int, repeat: int, root: str) -> dict[str, Any]:
    from actors._engine.lifecycle import TrialTable
    from actors._engine.spec import ExperimentSpec
    from actors._engine.store import SearchProgress
    from actors._engine.trial import TrialStatus
    from actors._shell.experiment_io import ExperimentIO
    from actors.messages import CheckpointRef

    spec = ExperimentSpec(
        name=f"state{n}", trainable=b"", trainable_name="t", searcher=None, scheduler=b"", stopper=None,
        metric="loss", mode="min", num_samples=n, max_concurrent=1, resources_per_trial={"cpu": 1},
        total_resources={"cpu": 1}, max_failures=0, fail_fast=False, storage_url=f"{root}/s{n}",
        storage_options={})
    io, table = ExperimentIO(spec), TrialTable()
    io.restore_into(table, None)
    for i in range(n):
        rec = table.add(f"{io.trial_prefix}_{i:05d}", {"lr": 0.001 * (i + 1), "layers": i % 4, "act": "relu"})
        rec.last_result = {f"metric_{k}": float(i * k) for k in range(12)} | {
            "training_iteration": 10, "trial_id": rec.trial_id, "done": True, "time_total_s": 12.5,
            "timestamp": 1_765_000_000 + i, "pid": 4242, "hostname": "host", "node_ip": "127.0.0.1"}
        rec.checkpoint = CheckpointRef(f"{rec.trial_id}/checkpoint_000001", 1, 10, 12.5, {"loss": 0.1})
        rec.status = TrialStatus.TERMINATED
    costs = []
    for r in range(repeat):
        io.last_state = -1e9  # (due now)
        io.dirty = True
        started = time.perf_counter()
        io.snapshot_table(table, None, SearchProgress(n), tag=r)
        io.scheduler_saved(pickle.dumps({"s": r}), r)
        costs.append(time.perf_counter() - started)
    cost = statistics.median(costs)
    io.write_cost = cost
    io.dirty = False
    # the wait state_due asks after this write when only the periodic write is due
    spacing = next(s / 100 for s in range(1, 100_000) if _due_after(io, s / 100))
    return {"trials": n, "write_s": round(cost, 4), "periodic_spacing_s": spacing,
            "controller_share": round(cost / max(spacing, cost), 3)}


def _due_after(io: Any, seconds: float) -> bool:
    io.last_state = 0.0
    io.clock = lambda: seconds
    return bool(io.state_due())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", default="100,1000,5000,20000", help="state sizes, comma-separated")
    parser.add_argument("--repeat", type=int, default=3, help="writes per size (the median is reported)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as root:
        sizes = [one_size(int(n), args.repeat, root) for n in args.trials.split(",")]
    _common.emit({"benchmark": "state_write", "storage": "local disk", "sizes": sizes,
                  "ray_share_cap": 0.05})


if __name__ == "__main__":
    main()
