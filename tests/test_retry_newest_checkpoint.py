"""A retry, or a restore, resumes from the newest checkpoint committed in storage.

The controller may never have heard of it: the trial's process died after the checkpoint's
manifest was written but before its result was sent. The history stays contiguous, with no
duplicate iteration: rows the controller never got come from the manifests (up to the chosen
checkpoint), and the resumed run reports the iterations after it.
"""

from __future__ import annotations

import json
import os
import signal
from typing import Any

import pytest

from actors import (
    Checkpoint,
    CheckpointConfig,
    FailureConfig,
    RunConfig,
    Stopper,
    Trainable,
    TuneConfig,
    Tuner,
    get_checkpoint,
    report,
)
from actors._engine.trial import TrialStatus
from actors._shell.recovery import Found, choose
from actors.messages import CheckpointRef
from actors.schedulers import FIFOScheduler
from actors.search import Searcher
from storage import committed_after, read_experiment_state
from tests import _driver_script as D
from tests.test_restore import assert_contiguous, restore_and_fit
from tests.test_result_latency import DiesAfterCommit


def crashes_once(config: dict[str, Any]) -> None:
    """``i`` always equals ``training_iteration``; the first run dies after 10 checkpointed reports."""
    ckpt = get_checkpoint()
    start = ckpt.to_dict()["i"] if ckpt else 0
    for i in range(start + 1, config["steps"] + 1):
        first_run = ckpt is None
        dying = first_run and i == 10
        kind = DiesAfterCommit if dying and config["inside_commit"] else Checkpoint
        report({"i": i, "restored_from": start}, checkpoint=kind.from_dict({"i": i}))
        if dying:
            os._exit(3)


@pytest.mark.slow
@pytest.mark.parametrize("inside_commit", [False, True], ids=["dies_after_report", "dies_inside_commit"])
def test_retry_resumes_from_the_newest_committed_checkpoint(inside_commit, tmp_path, no_leaks):
    grid = Tuner(crashes_once, param_space={"steps": 14, "inside_commit": inside_commit},
                 run_config=RunConfig(name="exp", storage=str(tmp_path / "results"), verbose=0,
                                      failure_config=FailureConfig(max_failures=1))).fit()
    (result,) = list(grid)
    assert result.status is TrialStatus.TERMINATED, result.error
    history = result.metrics_history
    assert [h["training_iteration"] for h in history] == list(range(1, 15))  # contiguous, no duplicate
    assert [h["i"] for h in history] == list(range(1, 15))
    assert [h["restored_from"] for h in history] == [0] * 10 + [10] * 4  # the retry started at 10


# ---------------------------------------------------------------------------------- the choice
def _ref(index: int, iteration: int) -> CheckpointRef:
    return CheckpointRef(f"t/checkpoint_{index:06d}", index, iteration, float(iteration), {})


def _rows(*its: int) -> tuple[dict[str, Any], ...]:
    return tuple({"training_iteration": i} for i in its)


def test_choose_takes_the_newest_checkpoint_the_history_reaches():
    found = [Found(_ref(3, 4), _rows(3, 4)), Found(_ref(4, 6), _rows(5, 6)), Found(_ref(5, 8), _rows(8))]
    got = choose(found, logged=2)
    assert got.checkpoint == _ref(4, 6)  # 8 is past a gap: iteration 7 is nowhere
    assert [r["training_iteration"] for r in got.rows] == [3, 4, 5, 6]
    assert got.usable == [_ref(3, 4), _ref(4, 6)] and got.unusable == [_ref(5, 8)]


def test_choose_skips_rows_already_logged_and_needs_none_when_the_history_has_them():
    assert [r["training_iteration"] for r in choose([Found(_ref(1, 4), _rows(2, 3, 4))], 3).rows] == [4]
    got = choose([Found(_ref(1, 4))], logged=6)  # rows after it were logged: they get rewound
    assert got.checkpoint == _ref(1, 4) and got.rows == []


def test_choose_finds_nothing_usable_past_a_gap():
    got = choose([Found(_ref(2, 5), _rows(5))], logged=3)  # iteration 4 is lost
    assert got.checkpoint is None and got.unusable == [_ref(2, 5)]


def test_choose_refuses_a_checkpoint_of_a_run_the_history_does_not_continue():
    """A run killed while its save was on the way committed a checkpoint at 4 (its rows say it restarted at 3);
    the next run went on from the checkpoint at 3 and logged its own 4 and 5. Resuming from the first run's
    checkpoint would join two runs' rows (found by a seeded simulation with stragglers and lost messages,
    seed 2419: the restored history's row 4 was not the one the checkpoint carried)."""
    def row(it: int, since: int) -> dict[str, Any]:
        return {"training_iteration": it, "iterations_since_restore": since, "time_total_s": float(it)}

    history = [row(1, 1), row(2, 2), row(3, 1), row(4, 1), row(5, 2)]
    killed = Found(CheckpointRef("t/checkpoint_000003", 3, 4, 4.0, row(4, 2)), (row(4, 2),))
    got = choose([killed], logged=5, history=history)
    assert got.checkpoint is None and got.unusable == [killed.ref]
    same = Found(CheckpointRef("t/checkpoint_000003", 3, 4, 4.0, row(4, 1)), (row(4, 1),))
    assert choose([same], logged=5, history=history).checkpoint == same.ref
    # a later checkpoint of the history's own run is still taken, with its rows
    newer = Found(CheckpointRef("t/checkpoint_000004", 4, 6, 6.0, row(6, 3)), (row(6, 3),))
    got = choose([killed, newer], logged=5, history=history)
    assert got.checkpoint == newer.ref and got.rows == [row(6, 3)] and got.unusable == [killed.ref]


# ---------------------------------------------------------------------------------- restore
STEPS = 10  # the "fifo" scenario's trials report 10 iterations


def _newer_than_state(run: D.Run) -> dict[str, int]:
    """RUNNING trials in the saved state -> the iteration of the newest checkpoint committed in
    storage above the state's ``max_index`` for them (the state never heard of it). A trial whose
    newest is its last iteration's is left out: it has no resumed row to check."""
    state = run.state()
    out: dict[str, int] = {}
    for row in (state or {}).get("trials", []):
        if row["status"] == "RUNNING":
            newer = committed_after(run.ctx, run.layout.trial_dir(row["trial_id"]), int(row["max_index"]))
            if newer and newer[-1].metadata["iteration"] < STEPS:
                out[row["trial_id"]] = newer[-1].metadata["iteration"]
    return out


def _freeze_when_newer(run: D.Run) -> dict[str, int]:
    """Stop the whole actor system (SIGSTOP) at a moment when storage holds a checkpoint newer
    than the saved state; then it is killed as a machine crash would. Frozen first, so no
    state write can land between looking and killing."""
    def frozen_with_newer() -> dict[str, int] | None:
        if not run.groups or not _newer_than_state(run):
            return None
        for g in run.groups:
            os.killpg(g, signal.SIGSTOP)
        found = _newer_than_state(run)
        if not found:
            for g in run.groups:
                os.killpg(g, signal.SIGCONT)
        return found or None

    return run.wait_for("a checkpoint newer than the saved state", frozen_with_newer)


@pytest.mark.slow
def test_restore_resumes_from_a_checkpoint_newer_than_the_saved_state(tmp_path, no_leaks):
    with D.Run(tmp_path, "fifo") as run:
        newest = _freeze_when_newer(run)
        run.kill()
    grid = restore_and_fit(run)
    assert_contiguous(grid, 6, steps=STEPS)
    by_id = {r.trial_id: r for r in grid}
    for tid, it in newest.items():  # its first resumed row restored the newest checkpoint
        assert by_id[tid].metrics_history[it]["restored_from"] == it - 1, (tid, it)


def test_restore_fills_the_history_from_manifests_and_drops_what_it_cannot_reach(storage_dir):
    """Storage side of a restore: the state knows checkpoint 0 (iteration 2) of both trials. For
    ``a`` the newer ones carry rows 3..5: it resumes from iteration 5 with history 1..5. For ``b``
    row 3 is nowhere: its newer checkpoint is unreachable, deleted, and it resumes from 0."""
    from actors._driver.restore import _rewind
    from actors._driver.resume import ResumeChoices
    from storage import ResultWriter, commit_checkpoint, list_checkpoints, read_results
    from tests.test_restore import _io, _row

    io, _ = _io(storage_dir)
    a, b = f"{io.trial_prefix}_00000", f"{io.trial_prefix}_00001"

    def commit(tid: str, index: int, iteration: int, rows: tuple[int, ...]) -> CheckpointRef:
        local = os.path.join(io.ctx.root, f".src-{tid}-{index}")
        os.makedirs(local)
        path = io.layout.checkpoint_dir(tid, index)
        commit_checkpoint(io.ctx, path, local, {"iteration": iteration, "time_total_s": 1.0, "metrics": {},
                                                "results": [{"training_iteration": i, "trial_id": tid}
                                                            for i in rows]})
        return CheckpointRef(path, index, iteration, 1.0, {})

    known = {}
    for tid in (a, b):
        w = ResultWriter(io.ctx, io.layout, tid)
        w.append([{"training_iteration": i, "trial_id": tid} for i in (1, 2)])
        w.close()
        known[tid] = commit(tid, 0, 2, (1, 2))
    commit(a, 1, 4, (3, 4))
    commit(a, 2, 5, (5,))
    commit(b, 1, 4, (4,))
    state = {"version": 1, "trial_prefix": io.trial_prefix, "suggested": 2,
             "trials": [_row(t, "RUNNING", known[t], 0, 2) for t in (a, b)]}
    io2, table = _io(storage_dir, _rewind(state, ResumeChoices()))
    assert table.get(a).checkpoint.index == 2 and io2.next_checkpoint_index(table.get(a)) == 3
    assert [r["training_iteration"] for r in read_results(io.ctx, io.layout, a)] == [1, 2, 3, 4, 5]
    assert table.get(b).checkpoint.index == 0 and io2.next_checkpoint_index(table.get(b)) == 1
    assert [r["training_iteration"] for r in read_results(io.ctx, io.layout, b)] == [1, 2]
    assert [c.index for c in list_checkpoints(io.ctx, io.layout.trial_dir(b))] == [0]


# ------------------------------------------------------- restore past the saved state, at the end
class Counts(Trainable):
    """A class trainable: ``step`` always runs once more, so resuming past its end shows."""

    def setup(self, config: dict[str, Any]) -> None:
        self.i = self.restored_from = 0

    def step(self) -> dict[str, Any]:
        self.i += 1
        return {"i": self.i, "restored_from": self.restored_from}

    def save_checkpoint(self, checkpoint_dir: str) -> None:
        with open(os.path.join(checkpoint_dir, "i.json"), "w") as f:
            json.dump(self.i, f)

    def load_checkpoint(self, checkpoint_dir: str) -> None:
        with open(os.path.join(checkpoint_dir, "i.json")) as f:
            self.i = self.restored_from = json.load(f)


SEEN: list[tuple[str, Any]] = []  # what the stopper and the scheduler were shown (system="simple")
LAST = [10]  # where the stopper ends the trial (the test changes it before restoring)


class AtLast(Stopper):
    def __call__(self, trial_id: str, result: dict[str, Any]) -> bool:
        SEEN.append(("stopper", result["training_iteration"]))
        return bool(result["training_iteration"] >= LAST[0])

    def stop_all(self) -> bool:
        return False


class OneConfig(Searcher):
    """Suggests one empty config; records what it is told."""

    def __init__(self) -> None:
        super().__init__()
        self.given = 0

    def suggest(self, trial_id: str) -> Any:
        self.given += 1
        return {} if self.given == 1 else Searcher.FINISHED

    def on_trial_result(self, trial_id: str, result: dict[str, Any]) -> None:
        SEEN.append(("searcher", result["training_iteration"]))

    def on_trial_complete(self, trial_id: str, result: dict[str, Any] | None = None, error: bool = False) -> None:
        SEEN.append(("searcher complete", (result or {}).get("training_iteration")))

    def save(self) -> dict[str, Any]:
        return {"given": self.given}

    def restore(self, state: dict[str, Any]) -> None:
        self.given = state["given"]


class Recording(FIFOScheduler):
    def on_trial_complete(self, tune_controller: Any, trial: Any, result: dict[str, Any]) -> None:
        SEEN.append(("complete", result["training_iteration"]))


def _state_back_at(storage: str, iteration: int, decided: bool) -> None:
    """Rewrite the finished experiment's state as if saved while its trial was at ``iteration``:
    the run was killed after logging later results and committing their checkpoints. Unless the
    stop was ``decided`` before the kill, the last row does not yet say ``done``."""
    from storage import (
        ExperimentLayout,
        ResultWriter,
        StorageContext,
        list_checkpoints,
        read_results,
        write_experiment_state,
    )

    ctx = StorageContext(storage, {})
    layout = ExperimentLayout(ctx, "exp")
    state = read_experiment_state(ctx, layout)
    assert state is not None
    row = state["trials"][0]
    layout.set_dirname(row["trial_id"], row.get("dirname"))
    found = list_checkpoints(ctx, layout.trial_dir(row["trial_id"]))
    (ck,) = [c for c in found if c.metadata["iteration"] == iteration]
    row.update(status="RUNNING", max_index=ck.index, logged_iteration=iteration,
               last_result=read_results(ctx, layout, row["trial_id"])[iteration - 1],
               checkpoint={"path": ck.path, "index": ck.index, "iteration": iteration,
                           "time_total_s": ck.metadata["time_total_s"], "metrics": ck.metadata.get("metrics", {})})
    write_experiment_state(ctx, layout, state)
    writer = ResultWriter(ctx, layout, row["trial_id"])
    rows = writer.json.rows()
    if not decided:
        writer.truncate(0)
        writer.append([{k: v for k, v in r.items() if k != "done"} for r in rows])
    writer.close()


@pytest.mark.parametrize(("last", "decided", "end"), [(10, False, 10), (12, True, 10), (12, False, 12)],
                         ids=["stopper_ends_it_at_the_newest", "stopped_before_the_kill", "runs_on"])
def test_restore_shows_the_stop_criteria_the_rows_the_saved_state_never_saw(last, decided, end, tmp_path,
                                                                           no_leaks):
    """Killed when storage held iterations 7..10 and their checkpoints but the state said RUNNING
    at 6: a trial stopped at 10 (by the restored stopper, or before the kill: its row says done)
    is not run to 11 (it was, before), and one that is not resumes from 10. Either way the stopper
    is shown 7..10 first, and the searcher the ones that did not stop it."""
    storage = str(tmp_path / "results")
    run_config = RunConfig(name="exp", storage=storage, verbose=0, system="simple", stop=AtLast(),
                           checkpoint_config=CheckpointConfig(checkpoint_frequency=2))
    LAST[0] = 10
    Tuner(Counts, run_config=run_config, tune_config=TuneConfig(scheduler=Recording(), search_alg=OneConfig())).fit()
    _state_back_at(storage, 6, decided)
    SEEN.clear()
    LAST[0] = last
    try:
        (result,) = Tuner.restore(os.path.join(storage, "exp"), Counts).fit()
    finally:
        LAST[0] = 10
    assert result.status is TrialStatus.TERMINATED
    history = [r["training_iteration"] for r in result.metrics_history]
    assert history == list(range(1, end + 1))
    assert [r["i"] for r in result.metrics_history] == history
    assert result.metrics["training_iteration"] == end and result.metrics["done"] is True
    assert result.metrics_history[-1]["done"] is True
    assert result.checkpoint is not None
    assert [r["restored_from"] for r in result.metrics_history] == [0] * 10 + [10] * (end - 10)
    stopper = [x for x in SEEN if x[0] == "stopper"]
    assert stopper == [("stopper", i) for i in range(7, end + 1)]
    searcher = [x for x in SEEN if x[0] == "searcher"]  # not of the stopping row (Ray)
    assert searcher == [("searcher", i) for i in range(7, end)]
    assert sorted(x for x in SEEN if "complete" in x[0]) == [("complete", end), ("searcher complete", end)]

