"""``Tuner.restore``: a driver SIGKILLed mid-experiment, the restore flags, and bad input.

The kill tests run ``tests/_driver_script.py`` as a real process, wait (polling
storage, with a deadline) until the experiment reaches a chosen point, SIGKILL
the driver and every process of its actor system, then restore in this process.
"""

from __future__ import annotations

import base64
import json
import os
import pickle
from collections.abc import Callable
from typing import Any

import pytest

from actors import Callback, RunConfig, TuneConfig, Tuner, report
from actors._driver.errors import ConfigError
from actors._engine.store import SearchProgress
from actors._engine.trial import TrialStatus
from actors.search import grid_search
from storage import MANIFEST_NAME, manifest_path, read_experiment_state, read_results
from tests import _driver_script as D

NAME = D.NAME
TERMINATED = TrialStatus.TERMINATED.value


# ---------------------------------------------------------------------------------- assertions
def iterations(result: Any) -> list[int]:
    return [h["training_iteration"] for h in result.metrics_history]


def assert_contiguous(grid: Any, n: int, steps: int | None) -> None:
    """Every trial TERMINATED; its history 1..N exactly once, and N == steps when given."""
    assert len(grid) == n
    assert len({r.trial_id for r in grid}) == n
    for r in grid:
        assert r.status is TrialStatus.TERMINATED, (r.trial_id, r.status, r.error)
        its = iterations(r)
        assert its == list(range(1, len(its) + 1)), (r.trial_id, its)
        # the trainable's own counter matches: every resume came from the right checkpoint
        assert [h["step"] for h in r.metrics_history] == [i - 1 for i in its], r.trial_id
        if steps is not None:
            assert its[-1] == steps, (r.trial_id, its)
        assert r.metrics["training_iteration"] == its[-1]


def checkpoint_dirs(storage: str) -> list[tuple[str, bool]]:
    """(path, committed) of every checkpoint directory on local storage."""
    out = []
    for root, dirs, _files in os.walk(storage):
        if os.path.basename(root).startswith("checkpoint_"):
            out.append((root, os.path.isfile(manifest_path(root))))
            dirs[:] = []
    return sorted(out)


def result_lines(run: D.Run, row: dict[str, Any]) -> list[dict[str, Any]]:
    """The rows of a trial of the saved state (in the directory its row names; none before it started)."""
    run.layout.set_dirname(row["trial_id"], row.get("dirname"))
    return read_results(run.ctx, run.layout, row["trial_id"])


def restore_and_fit(run: D.Run, trainable: Any = D.counter, **flags: Any) -> Any:
    assert Tuner.can_restore(run.path, run.options)
    return Tuner.restore(run.path, trainable, storage_options=run.options, **flags).fit()


# ---------------------------------------------------------------------------------- (a) kills
def _first_result(run: D.Run) -> Callable[[], Any]:
    return D.when_state(run, lambda st: any(result_lines(run, row) for row in st["trials"]))


def _mid_trial(run: D.Run) -> Callable[[], Any]:
    return D.when_state(run, lambda st: any(
        r["status"] == "RUNNING" and r["checkpoint"] and r["checkpoint"]["iteration"] >= 2 for r in st["trials"]))


def _some_finished(run: D.Run) -> Callable[[], Any]:
    return D.when_state(run, lambda st: 2 <= D.statuses(st).count(TERMINATED) < len(D.statuses(st)))


# kill point -> (scenario, condition). "fifo" batches results (window 256), "fifo1" decides each one.
KILL_POINTS: dict[str, tuple[str, Callable[[D.Run], Callable[[], Any]]]] = {
    "after_first_result": ("fifo", _first_result),
    "mid_trial_with_checkpoint": ("fifo1", _mid_trial),
    "after_some_finished": ("fifo", _some_finished),
}


@pytest.mark.slow
@pytest.mark.parametrize("point", sorted(KILL_POINTS))
def test_driver_killed_then_restored_fifo(point, tmp_path, no_leaks):
    scenario, condition = KILL_POINTS[point]
    with D.Run(tmp_path, scenario) as run:
        run.wait_for(point, condition(run))
        run.kill()
    state = run.state()
    assert state is not None
    finished = {r["trial_id"]: result_lines(run, r) for r in state["trials"]
                if r["status"] == TERMINATED}
    grid = restore_and_fit(run)
    assert_contiguous(grid, 6, steps=10)
    by_id = {r.trial_id: r for r in grid}
    for tid, rows in finished.items():  # finished before the crash: not rerun
        assert by_id[tid].metrics_history == rows
    resumed = [r for r in state["trials"] if r["status"] == "RUNNING" and r["checkpoint"]]
    for row in resumed:  # went on from its saved checkpoint (or a newer one in storage), not from scratch
        it = row["checkpoint"]["iteration"]
        history = by_id[row["trial_id"]].metrics_history
        D.assert_resumed_at_or_after(history, it, row["trial_id"], run.killed_at)
    if point == "mid_trial_with_checkpoint":
        assert resumed
    assert all(committed for _, committed in checkpoint_dirs(run.storage))


def stored_checkpoints(run: D.Run) -> dict[str, set[str]]:
    """Every checkpoint directory of the experiment on any store (on S3: every prefix holding an
    object) by its URI -> the names of the files in it, and ``MANIFEST_NAME`` if committed (its manifest
    is beside it)."""
    fs = run.ctx.fs
    fs.invalidate_cache()
    out: dict[str, set[str]] = {}
    for path, info in fs.find(run.layout.experiment_dir, withdirs=True, detail=True).items():
        parts = path.rstrip("/").split("/")
        at = next((i for i, p in enumerate(parts) if p.startswith("checkpoint_")), None)
        if at is None:
            if info["type"] == "file" and parts[-1].startswith(".checkpoint_") and parts[-1].endswith(MANIFEST_NAME):
                committed = "/".join([*parts[:-1], parts[-1][1:-len(MANIFEST_NAME)]])
                out.setdefault(run.ctx.uri(committed), set()).add(MANIFEST_NAME)
            continue
        files = out.setdefault(run.ctx.uri("/".join(parts[:at + 1])), set())
        if info["type"] == "file":
            files.add("/".join(parts[at + 1:]))
    return out


@pytest.mark.slow
@pytest.mark.parametrize("store", ["local", pytest.param("s3", marks=pytest.mark.s3)])
def test_driver_killed_during_checkpoint_upload(store, tmp_path, request, no_leaks):
    """A checkpoint of many files is being uploaded when everything dies: restore removes it and
    resumes from the committed one before it. On S3 no object of it is left."""
    url, options = request.getfixturevalue("s3_location") if store == "s3" else (None, None)

    def uploading() -> list[str]:
        return [d for d, files in stored_checkpoints(run).items() if files and MANIFEST_NAME not in files]

    with D.Run(tmp_path, "shards", storage=url, options=options) as run:
        def both_held() -> bool:  # each trial: step 0 committed and saved in the state, step 1 hanging
            st = run.state()
            return (st is not None and all(r.get("checkpoint") for r in st["trials"]) and len(st["trials"]) == 2
                    and len(uploading()) == 2)
        run.wait_for("both trials inside their second checkpoint's upload", both_held)
        run.kill()
    half = uploading()
    assert len(half) == 2, "the kill should have interrupted both uploads"
    grid = restore_and_fit(run, D.shards)
    assert_contiguous(grid, 2, steps=4)
    assert [r.metrics["restored_from"] for r in grid] == [0, 0], "resumed from the committed step 0"
    # the restore removed the half uploads before the trials resumed (later commits and retention
    # would hide them by the end): each trial saw none left in its directory when it started
    assert [r.metrics_history[1]["uncommitted_at_start"] for r in grid] == [0, 0]
    stored = stored_checkpoints(run)
    assert all(MANIFEST_NAME in files for files in stored.values()), stored.keys()
    if store == "local":
        assert all(committed for _, committed in checkpoint_dirs(run.storage))  # no empty dir left either
    for r in grid:  # num_to_keep=2 still holds after the restore
        mine = [d for d in stored if f"/{os.path.basename(r.path)}/" in d + "/"]
        assert 1 <= len(mine) <= 2, mine
        with r.checkpoint.as_directory() as d, open(os.path.join(d, "step.txt")) as f:
            assert int(f.read()) == 3
        assert len(stored[r.checkpoint.path]) == D.shard_files(run.storage) + 2  # shards, step.txt, manifest


def _asha_rungs(state: dict[str, Any]) -> dict[float, dict[str, float]]:
    blob = pickle.loads(base64.b64decode(state["scheduler"]))
    rungs = blob["scheduler"]["state"]["_rungs"][0]
    return {m: dict(r) for m, r in rungs}


@pytest.mark.slow
def test_driver_killed_then_restored_random_search_continues_its_sequence(tmp_path, no_leaks):
    """A seeded searcher's state is restored exactly: the configs after the restore are the ones
    an uninterrupted run with the same seed draws, none drawn twice, none skipped. (As in Ray Tune,
    the default generator's 8 trials are all created up front, so the unfinished ones wait with
    their drawn configs in the saved state.)"""
    def some_done_more_to_come(st: dict[str, Any]) -> bool:
        done = sum(1 for r in st["trials"] if r["status"] == TERMINATED)
        return done >= 1 and done < 8

    with D.Run(tmp_path, "random") as run:
        run.wait_for("a finished trial and configs still to draw", D.when_state(run, some_done_more_to_come))
        run.kill()
    grid = restore_and_fit(run)
    assert_contiguous(grid, 8, steps=6)
    reference = D.tuner(str(tmp_path / "reference"), "reference", "random").fit()
    assert sorted(r.config["x"] for r in grid) == sorted(r.config["x"] for r in reference)


def _pbt_state(state: dict[str, Any]) -> dict[str, Any]:
    return pickle.loads(base64.b64decode(state["scheduler"]))["scheduler"]["state"]


@pytest.mark.slow
def test_driver_killed_then_restored_pbt_keeps_its_population_and_exploits(tmp_path, no_leaks):
    """PBT's members, exploit log and RNG are saved with the experiment: after a SIGKILL of the
    driver, the restored PBT knows every exploit made before it, and the run finishes."""
    def exploited(st: dict[str, Any]) -> bool:
        return st.get("scheduler") is not None and bool(_pbt_state(st)["_exploits"]) and any(
            r["status"] != TERMINATED for r in st["trials"])

    with D.Run(tmp_path, "pbt") as run:
        run.wait_for("an exploit with trials still to run", D.when_state(run, exploited))
        run.kill()
    before = run.state()
    assert before is not None
    exploits_before = _pbt_state(before)["_exploits"]
    grid = restore_and_fit(run)
    assert len(grid) == 4
    after = run.state()
    assert after is not None
    exploits_after = _pbt_state(after)["_exploits"]
    for r in grid:
        assert r.status is TrialStatus.TERMINATED, (r.trial_id, r.error)
        # an exploit copies another trial's step counter, so lengths differ; and a clone's rows go on from
        # its source's checkpoint after its own rows, as in Ray. The source's checkpoint may be behind the
        # trial (seen when the restored PBT, which never saw a row committed after its saved state, perturbed
        # at the next one: [1..7, 7, 8..12]) or ahead of it (the restore resumed the trials from checkpoints
        # at different iterations, so a source can be ahead: a forward jump, seen in CI). Otherwise the
        # history is contiguous (the restore truncated it where the trial went on), and every row's step
        # is its iteration's (each run resumed from the right checkpoint); only an exploit makes a jump.
        its = iterations(r)
        assert its[0] == 1 and [h["step"] for h in r.metrics_history] == [i - 1 for i in its], (r.trial_id, its)
        jumps = [k for k in range(1, len(its)) if its[k] != its[k - 1] + 1]
        assert len(jumps) <= sum(e["trial_id"] == r.trial_id for e in exploits_after), f"{r.trial_id}: {its}"
        # ran to the trainable's own end; or (a race PBT may lose, as Ray Tune's does) it cloned a
        # source whose last result was in but whose end was not yet known, and so took over a
        # checkpoint at the end: either way its final checkpoint is the last step's
        assert r.checkpoint is not None and r.checkpoint.to_dict()["step"] == 11, (r.trial_id, r.metrics)
    assert exploits_after[:len(exploits_before)] == exploits_before  # nothing before the kill was lost
    assert set(_pbt_state(before)["_members"]) <= set(_pbt_state(after)["_members"])


@pytest.mark.slow
def test_driver_killed_then_restored_asha_keeps_its_rungs(tmp_path, no_leaks):
    """x = 1..8 in order, so every trial is worse at rung 2 than x=1 and x=2, which ran first.

    A restored ASHA compares the trials it runs after the restore with the rung values it
    recorded before the crash and stops them at rung 2. A fresh one would let the first
    trial to reach rung 2 after the restore go on, since a rung's first value always passes.
    """
    def best_two_done(st: dict[str, Any]) -> bool:
        done = [r["config"]["x"] for r in st["trials"] if r["status"] == TERMINATED]
        return {1.0, 2.0} <= set(done) and len(done) < 8 and st["scheduler"] is not None

    with D.Run(tmp_path, "asha") as run:
        run.wait_for("x=1 and x=2 finished, others to come", D.when_state(run, best_two_done))
        run.kill()
    before = run.state()
    assert before is not None
    rungs_before = _asha_rungs(before)
    assert len(rungs_before[2.0]) >= 2, rungs_before
    finished = {r["trial_id"]: result_lines(run, r) for r in before["trials"]
                if r["status"] == TERMINATED}
    grid = restore_and_fit(run)
    assert_contiguous(grid, 8, steps=None)
    by_id = {r.trial_id: r for r in grid}
    assert all(by_id[t].metrics_history == rows for t, rows in finished.items())  # not rerun
    assert len(finished) < 8  # some trials ran after the restore: those are the ones judged here
    for r in grid:
        if r.config["x"] >= 3:
            assert r.metrics["training_iteration"] <= 3, (r.config, iterations(r))
    after = run.state()
    assert after is not None
    for milestone, recorded in rungs_before.items():  # nothing recorded before the crash was lost
        assert recorded.items() <= _asha_rungs(after)[milestone].items(), milestone


def _hyperband_state(state: dict[str, Any]) -> dict[str, Any]:
    return pickle.loads(base64.b64decode(state["scheduler"]))["scheduler"]["state"]


def _final_iterations(grid: Any) -> dict[float, int]:
    return {r.config["x"]: r.metrics["training_iteration"] for r in grid}


@pytest.mark.slow
def test_driver_killed_then_restored_hyperband_keeps_its_brackets(tmp_path, no_leaks):
    """max_t=3, rf=3 fills brackets as Ray Tune does: s=0 (2 trials, milestone 3) takes x=1, 2;
    s=1 (3 trials, milestones 1 and 3) takes x=25, 3, 4.  Killed while x=3 and x=4 are parked
    (PAUSED) at s=1's first milestone and x=25 (slow), the last of that bracket, still runs
    towards it.

    A restored HyperBand still has them waiting in that bracket: when x=25 arrives it halves
    the bracket, resumes only x=3 (from its checkpoint) and stops x=4 and x=25 at iteration 1,
    exactly as an uninterrupted run does. A fresh one would not know them as parked: it would
    run them as ordinary pending trials of new brackets, and x=4 would run past its first milestone.
    """
    def _waiting(st: dict[str, Any]) -> tuple[float, set[str]]:
        b = next((b for b in _hyperband_state(st)["_bands"][0] if b is not None and b.s == 1), None)
        if b is None:
            return 0, set()
        return b.r, {t for t, p in b.live.items() if p is not None and p[0] >= b.r}

    def parked_while_others_run(st: dict[str, Any]) -> bool:
        if st.get("scheduler") is None or "RUNNING" not in D.statuses(st):
            return False
        milestone, waiting = _waiting(st)
        paused = {r["trial_id"] for r in st["trials"] if r["status"] == "PAUSED" and r["checkpoint"]}
        return milestone == 1 and len(waiting) == 2 and waiting <= paused

    with D.Run(tmp_path, "hyperband") as run:
        run.wait_for("x=3 and x=4 parked, x=25 running", D.when_state(run, parked_while_others_run))
        run.kill()
    before = run.state()
    assert before is not None
    rows = {r["trial_id"]: r for r in before["trials"]}
    parked = _waiting(before)[1]
    assert sorted(rows[t]["config"]["x"] for t in parked) == [3.0, 4.0], parked
    history_before = {t: result_lines(run, rows[t]) for t in parked}
    assert all(len(h) == 1 for h in history_before.values()), history_before

    grid = restore_and_fit(run)
    assert_contiguous(grid, 5, steps=None)
    by_id = {r.trial_id: r for r in grid}
    for tid in parked:  # each resumed from the checkpoint it was paused with, or never ran again
        it = rows[tid]["checkpoint"]["iteration"]
        history = by_id[tid].metrics_history
        assert history[:it] == history_before[tid], tid  # its rows before the kill were kept
        if len(history) > it:
            assert history[it]["restored_from"] == it - 1, (tid, history)
    winner = next(t for t in parked if rows[t]["config"]["x"] == 3.0)
    assert len(by_id[winner].metrics_history) > 1  # promoted after the restore
    # the halving after the restore gave what an uninterrupted run with this config gives
    reference = D.tuner(str(tmp_path / "reference"), "reference", "hyperband").fit()
    assert _final_iterations(grid) == _final_iterations(reference) == {1.0: 3, 2.0: 3, 25.0: 1, 3.0: 3, 4.0: 1}
    after = run.state()
    assert after is not None
    hb_before, hb_after = _hyperband_state(before), _hyperband_state(after)
    assert [[b.s for b in band] for band in hb_after["_bands"]] == [[0, 1]]  # one band, kept across the kill
    for b_before, b_after in zip(hb_before["_bands"][0], hb_after["_bands"][0], strict=False):
        assert b_after.trials[:len(b_before.trials)] == b_before.trials, (b_before, b_after)
    in_before = {t: b.s for t, b in hb_before["_trial_bracket"].items()}
    assert in_before.items() <= {t: b.s for t, b in hb_after["_trial_bracket"].items()}.items()
    assert [(b.r, b.halves) for b in hb_after["_bands"][0]] == [(3, 0), (3, 0)]  # s=1 halved once


@pytest.mark.slow
def test_resume_unfinished_false_ends_them_as_saved(tmp_path, no_leaks):
    with D.Run(tmp_path, "fifo") as run:
        run.wait_for("one finished, one running", D.when_state(
            run, lambda st: TERMINATED in D.statuses(st) and "RUNNING" in D.statuses(st)))
        run.kill()
    state = run.state()
    assert state is not None
    saved = {r["trial_id"]: r for r in state["trials"]}
    grid = restore_and_fit(run, resume_unfinished=False)
    assert len(grid) == 6 and grid.num_terminated == 6
    for r in grid:
        its = iterations(r)
        assert its == list(range(1, len(its) + 1))
        row = saved.get(r.trial_id)
        if row is None:  # suggested after the restore: ran normally
            assert its[-1] == 10
        elif row["status"] != TERMINATED:  # not resumed: ends as saved, its later rows dropped
            # (a trial that never reported: its id alone, as Ray 2.60's Result.metrics after a restore)
            expected = row["last_result"] if "training_iteration" in row["last_result"] else {"trial_id": r.trial_id}
            assert {k: v for k, v in r.metrics.items() if k != "experiment_tag"} == expected
            assert len(its) == row["last_result"].get("training_iteration", 0)


# ---------------------------------------------------------------------------------- (b) flags
# Recorded from Ray 2.60 (a grid of x=1.0, finishing 6 steps, and x=2.0, raising at the fourth; each reports
# with a checkpoint; restored with the bug fixed): restart_errored gives the errored trial a new id (8 hex
# digits) and a new directory, keeps its config and experiment_tag, runs it from scratch, and leaves the
# old trial's directory on disk but out of the results; with resume_errored too, resume_errored wins.
@pytest.mark.parametrize("flags,system", [
    ({"resume_errored": True}, "multiproc"),
    ({"restart_errored": True}, "simple"),
    ({"resume_errored": True, "restart_errored": True}, "simple"),
    ({}, "simple"),
])
def test_restore_flags_for_errored_trials(flags, system, storage_dir, no_leaks):
    first = D.errored_run(storage_dir, system)
    good = next(r for r in first if r.config["x"] == 1.0)
    old = next(r for r in first if r.config["x"] == 2.0)
    grid = Tuner.restore(first.experiment_path, D.fixed, **flags).fit()
    by_x = {r.config["x"]: r for r in grid}
    assert len(grid) == 2
    assert by_x[1.0].metrics_history == good.metrics_history  # finished: untouched
    bad = by_x[2.0]
    if not flags:
        assert bad.status is TrialStatus.ERROR and "bug in the trainable" in str(bad.error)
        assert "raise RuntimeError" in bad.error.traceback_text  # the traceback survives a restore
        assert iterations(bad) == [1, 2, 3]
        return
    assert bad.status is TrialStatus.TERMINATED and bad.error is None
    assert iterations(bad) == [1, 2, 3, 4, 5, 6]
    assert bad.metrics["experiment_tag"] == old.metrics["experiment_tag"] == "1_x=2.0000"
    restored_from = [h["restored_from"] for h in bad.metrics_history]
    if flags == {"restart_errored": True}:  # a new trial, from scratch, failures forgotten
        assert restored_from == [-1] * 6 and bad.num_failures == 0
        assert len(bad.trial_id) == 8 and "_" not in bad.trial_id and bad.trial_id != old.trial_id
        assert {h["trial_id"] for h in bad.metrics_history} == {bad.trial_id}
        assert bad.path != old.path and os.path.basename(bad.path).startswith(f"broken_{bad.trial_id}_1_x=2.0000_")
        assert [h["training_iteration"] for h in read_jsonl(old.path)] == [1, 2, 3]  # the old one: kept
        again = Tuner.restore(first.experiment_path, D.fixed).fit()  # and kept by the next restore too
        assert {r.trial_id for r in again} == {r.trial_id for r in grid} and os.path.isdir(old.path)
        assert sorted(r.metrics["experiment_tag"] for r in again) == ["0_x=1.0000", "1_x=2.0000"]
    else:  # from the checkpoint of step 2 (iteration 3), the same trial
        assert restored_from == [-1, -1, -1, 2, 2, 2] and bad.num_failures == 1
        assert bad.trial_id == old.trial_id and bad.path == old.path


def read_jsonl(trial_dir: str) -> list[dict[str, Any]]:
    with open(os.path.join(trial_dir, "result.json")) as f:
        return [json.loads(line) for line in f if line.strip()]


# ---------------------------------------------------------------------------------- (c) bad input
def test_can_restore_and_bad_paths(storage_dir, tmp_path, no_leaks):
    grid = D.errored_run(storage_dir, "simple")
    path = grid.experiment_path
    assert Tuner.can_restore(path) and Tuner.can_restore(path + "/")
    assert not Tuner.can_restore(storage_dir)  # the storage root, not an experiment
    assert not Tuner.can_restore(str(tmp_path / "nothing" / "here"))
    assert not Tuner.can_restore("")
    with pytest.raises(ConfigError, match=r"no audition experiment at .*nothing.*tuner\.pkl missing"):
        Tuner.restore(str(tmp_path / "nothing" / "here"), D.fixed)
    with pytest.raises(ConfigError, match="not an experiment directory"):
        Tuner.restore("/", D.fixed)
    with pytest.raises(ConfigError, match="restore path must be"):
        Tuner.restore("", D.fixed)
    with pytest.raises(ConfigError, match="must take one argument"):
        Tuner.restore(path, lambda a, b: None)
    # a saved tuner but no state yet: the run died before its first state write
    lone = tmp_path / "lone" / NAME
    lone.mkdir(parents=True)
    (lone / "tuner.pkl").write_bytes((tmp_path / "results" / NAME / "tuner.pkl").read_bytes())
    assert not Tuner.can_restore(str(lone))
    with pytest.raises(ConfigError, match="before its first state write; start it again with fit"):
        Tuner.restore(str(lone), D.fixed)


def test_corrupted_state_and_tuner_files(storage_dir, no_leaks):
    grid = D.errored_run(storage_dir, "simple")
    exp = os.path.join(storage_dir, NAME)
    pointer = os.path.join(exp, "experiment_state.json")

    def versions() -> list[str]:
        return sorted(os.path.join(exp, ".state", f) for f in os.listdir(os.path.join(exp, ".state")))

    # a torn pointer alone is survivable: the newest readable version is used
    with open(pointer, "w") as f:
        f.write('{"latest": "experim')
    assert Tuner.can_restore(grid.experiment_path)
    assert Tuner.restore(grid.experiment_path, D.fixed, resume_errored=True).fit().num_errors == 0
    # every version unreadable: a clear error, not a traceback from deep inside
    for v in versions():
        with open(v, "w") as f:
            f.write("{not json")
    with pytest.raises(ConfigError, match=r"corrupted experiment state at .*Restore the directory from a backup"):
        Tuner.restore(grid.experiment_path, D.fixed)
    # valid JSON that is not an audition state
    newest = versions()[-1]
    with open(newest, "w") as f:
        json.dump({"hello": 1}, f)
    with pytest.raises(ConfigError, match="cannot be restored: state format version None"):
        Tuner.restore(grid.experiment_path, D.fixed)
    with open(os.path.join(exp, "tuner.pkl"), "wb") as raw:
        raw.write(b"\x80\x05garbage")
    with open(newest, "w") as f:
        json.dump({"version": 1, "trial_prefix": "x", "suggested": 0, "trials": []}, f)
    with pytest.raises(ConfigError, match=r"saved tuner at .*tuner\.pkl is corrupted"):
        Tuner.restore(grid.experiment_path, D.fixed)


def test_a_tuner_saved_where_a_module_was_installed_names_that_module(tmp_path, monkeypatch, no_leaks):
    """A module the run could import and this process cannot (numpy, for the seeded default search's
    generator, in a venv without it) is named with the fix, not called corruption."""
    import sys

    from actors import ExperimentAnalysis

    mods = tmp_path / "mods"
    mods.mkdir()
    (mods / "audition_gone_search.py").write_text(
        "from actors.search import BasicVariantGenerator\n\n\nclass GoneSearch(BasicVariantGenerator):\n    pass\n")
    monkeypatch.syspath_prepend(str(mods))
    import audition_gone_search

    grid = Tuner(D.fixed, param_space={"x": grid_search([1, 2])},
                 tune_config=TuneConfig(search_alg=audition_gone_search.GoneSearch()),
                 run_config=RunConfig(name=NAME, storage=str(tmp_path / "results"), system="simple", verbose=0)).fit()
    monkeypatch.delitem(sys.modules, "audition_gone_search")
    sys.path.remove(str(mods))
    want = r"needs the module 'audition_gone_search', which is not installed here .*install the package"
    with pytest.raises(ConfigError, match=want):
        Tuner.restore(grid.experiment_path, D.fixed)
    with pytest.raises(ConfigError, match=want):
        ExperimentAnalysis(grid.experiment_path)


# ---------------------------------------------------------------------------------- storage side
def _io(storage: str, state: dict[str, Any] | None = None, keep: int | None = None) -> Any:
    from actors._engine.lifecycle import TrialTable
    from actors._engine.spec import ExperimentSpec
    from actors._shell.experiment_io import ExperimentIO

    spec = ExperimentSpec(
        name=NAME, trainable=b"", trainable_name="t", searcher=None, scheduler=b"", stopper=None,
        metric="loss", mode="min", num_samples=3, max_concurrent=1, resources_per_trial={"cpu": 1},
        total_resources={"cpu": 1}, max_failures=0, fail_fast=False, storage_url=storage, storage_options={},
        num_to_keep=keep, restore_state=state)
    io, table = ExperimentIO(spec), TrialTable()
    io.restore_into(table, None)
    return io, table


def _commit(io: Any, tid: str, index: int, iteration: int) -> Any:
    from actors.messages import CheckpointRef
    from storage import commit_checkpoint

    local = os.path.join(io.ctx.root, f".src-{tid}-{index}")
    os.makedirs(local)
    with open(os.path.join(local, "w.txt"), "w") as f:
        f.write(str(iteration))
    path = io.layout.checkpoint_dir(tid, index)
    commit_checkpoint(io.ctx, path, local, {"iteration": iteration, "time_total_s": 1.0, "metrics": {}})
    return CheckpointRef(path, index, iteration, 1.0, {})


def _row(tid: str, status: str, ck: Any, max_index: int, last: int) -> dict[str, Any]:
    return {"trial_id": tid, "config": {}, "status": status, "num_failures": 0, "error": None,
            "last_result": {"training_iteration": last} if last else {}, "max_index": max_index,
            "logged_iteration": last, "checkpoint": None if ck is None else {
                "path": ck.path, "index": ck.index, "iteration": ck.iteration, "time_total_s": 1.0,
                "metrics": {}}}


def test_restore_discards_what_the_saved_state_never_saw(storage_dir):
    """Rows, checkpoints and trial dirs written after the last state save are removed, except that
    a trial resumes from a checkpoint committed after the save when its history reaches it."""
    from actors._driver.restore import _rewind
    from actors._driver.resume import ResumeChoices
    from actors.messages import CheckpointRef
    from storage import ResultWriter, list_checkpoints

    io, _ = _io(storage_dir)
    pre = io.trial_prefix
    a, gone, done, late = (f"{pre}_{i:05d}" for i in range(4))
    for tid, n in ((a, 6), (gone, 3), (done, 2), (late, 2)):
        w = ResultWriter(io.ctx, io.layout, tid)
        w.append([{"training_iteration": i, "step": i - 1} for i in range(1, n + 1)])
        w.close()
    ck_a = [_commit(io, a, i, i + 1) for i in range(3)]  # the state knows 0 and 1 (iteration 2); 2 is newer
    half = io.layout.checkpoint_dir(a, 3)  # an upload cut short: files, no manifest
    os.makedirs(half)
    open(os.path.join(half, "w.txt"), "w").close()
    _commit(io, gone, 0, 1)  # the state names gone's checkpoint 1, which retention deleted
    ck_done = _commit(io, done, 1, 2)
    retired = _commit(io, done, 0, 1).path  # retention was deleting it when the run died:
    os.remove(manifest_path(retired))  # manifest gone, files left
    elsewhere = os.path.join(storage_dir, "other", "checkpoint_000000")
    os.makedirs(elsewhere)
    _commit(io, late, 0, 1)  # trial suggested after the state was saved
    state = {"version": 1, "trial_prefix": pre, "suggested": 3, "trials": [
        _row(a, "RUNNING", ck_a[1], 1, 4),
        _row(gone, "PAUSED", CheckpointRef(io.layout.checkpoint_dir(gone, 1), 1, 2), 1, 3),
        _row(done, "TERMINATED", ck_done, 1, 2)], "retired": [retired, elsewhere]}
    io2, table = _io(storage_dir, _rewind(state, ResumeChoices()), keep=2)
    assert io2.trial_prefix == pre  # re-suggested trials get their old ids back
    assert not os.path.exists(io.layout.trial_dir(late))
    assert [c.index for c in list_checkpoints(io.ctx, io.layout.trial_dir(a))] == [0, 1, 2]
    assert [r["training_iteration"] for r in read_results(io.ctx, io.layout, a)] == [1, 2, 3]
    assert table.get(a).checkpoint.index == 2 and io2.next_checkpoint_index(table.get(a)) == 3
    assert table.get(gone).checkpoint.index == 0  # fell back to the older committed one
    # paused: it keeps the rows the state had logged (its scheduler may stop it before it runs again); they
    # are redone from that checkpoint when it starts (TrialTable.start)
    assert [r["training_iteration"] for r in read_results(io.ctx, io.layout, gone)] == [1, 2, 3]
    assert [r["training_iteration"] for r in read_results(io.ctx, io.layout, done)] == [1, 2]
    assert [c.index for c in list_checkpoints(io.ctx, io.layout.trial_dir(done))] == [1]
    assert os.path.isdir(elsewhere)  # never outside the experiment being restored
    assert [c.index for c in io2.retention.ckpts[a]] == [0, 1, 2]  # retention knows the surviving ones
    # a resumed trial's last result is its history's last row until it reports again (saved: 4 and 3; the
    # paused one's history is as the state left it); one that ends as saved keeps its own
    assert table.get(a).last_result == {"training_iteration": 3, "step": 2}
    assert table.get(gone).last_result == {"training_iteration": 3, "step": 2}
    assert table.get(done).last_result == {"training_iteration": 2}


@pytest.mark.parametrize("any_ran", [True, False])
def test_restore_keeps_the_directories_its_state_names_and_removes_later_ones(storage_dir, any_ran):
    """Directories named as Ray names them (a state with ``trial_dirs``): a row's ``dirname`` is its
    directory; one of a trial first started after the state was saved (not in its rows) is removed,
    and a trial the state saw pending starts in a directory named then."""
    from actors._driver.restore import _rewind
    from actors._driver.resume import ResumeChoices
    from actors._shell.experiment_state import TRIAL_DIRS_NAMED
    from storage import ResultWriter, write_json

    io, _ = _io(storage_dir)
    pre = io.trial_prefix
    ran, pending, late = (f"{pre}_{i:05d}" for i in range(3))
    dirs = {ran: f"t_{ran}_0_x=1_2026-12-04_21-34-30", late: f"t_{late}_2_x=3_2026-12-04_21-34-40"}
    if not any_ran:  # no row names a directory: the state's trial_dirs alone says they are named
        del dirs[ran]
    for tid, dirname in dirs.items():
        io.layout.set_dirname(tid, dirname)
        write_json(io.ctx, io.layout.params_file(tid), {})
        w = ResultWriter(io.ctx, io.layout, tid)
        w.append([{"training_iteration": 1}])
        w.close()
    rows = [{**_row(ran, "TERMINATED", None, -1, 1), "dirname": dirs[ran], "opened": True}] if any_ran else []
    state = {"version": 1, "trial_prefix": pre, "suggested": 2, "trial_dirs": TRIAL_DIRS_NAMED, "trials": [
        *rows, _row(pending, "PENDING", None, -1, 0)]}
    io2, table = _io(storage_dir, _rewind(state, ResumeChoices()))
    exp = os.path.join(storage_dir, NAME)
    left = sorted(d for d in os.listdir(exp) if not d.startswith(".") and os.path.isdir(os.path.join(exp, d)))
    assert left == ([dirs[ran]] if any_ran else [])
    if any_ran:
        assert [r["training_iteration"] for r in read_results(io2.ctx, io2.layout, ran)] == [1]
        assert (table.get(ran).dirname, table.get(ran).opened) == (dirs[ran], True)
    assert (table.get(pending).dirname, table.get(pending).opened) == (None, False)  # named at its first start


def test_retention_spares_the_checkpoint_a_saved_state_names(storage_dir):
    from storage import is_committed

    io, table = _io(storage_dir, keep=1)
    rec = table.add(f"{io.trial_prefix}_00000", {})

    def checkpoint(index: int) -> Any:
        rec.checkpoint = ck = _commit(io, rec.trial_id, index, index + 1)
        io.on_checkpoint(rec, ck)
        return ck

    def save_state() -> None:
        io.snapshot_table(table, None, SearchProgress(1))
        io.scheduler_saved(pickle.dumps({}))

    ck0 = checkpoint(0)
    save_state()
    ck1 = checkpoint(1)
    ck2 = checkpoint(2)
    assert is_committed(io.ctx, ck0.path)  # a restore now would resume from it
    assert not is_committed(io.ctx, ck1.path)
    save_state()
    assert not is_committed(io.ctx, ck0.path) and is_committed(io.ctx, ck2.path)
    # the state lists what is deleted right after it: a restore finishes an interrupted deletion
    state = read_experiment_state(io.ctx, io.layout)
    assert state is not None and state["retired"] == [ck0.path]


def test_marks_are_saved_in_the_state_and_restored(storage_dir):
    """The recorded pauses/stops/exploits survive a state write and a restore; an older state has none."""
    from actors._driver.restore import _rewind
    from actors._driver.resume import ResumeChoices
    from actors._engine.marks import Mark, MarkKind

    io, table = _io(storage_dir)
    marked, old = f"{io.trial_prefix}_00000", f"{io.trial_prefix}_00001"
    table.add(marked, {}).marks = [Mark(MarkKind.PAUSE, 2), Mark(MarkKind.EXPLOIT, 3, "src")]
    table.add(old, {}).marks = [Mark(MarkKind.STOP, 1)]
    io.snapshot_table(table, None, SearchProgress(2))
    io.scheduler_saved(pickle.dumps({}))
    state = read_experiment_state(io.ctx, io.layout)
    assert state is not None
    rows = {r["trial_id"]: r for r in state["trials"]}
    assert rows[marked]["marks"] == [{"kind": "pause", "iteration": 2},
                                     {"kind": "exploit", "iteration": 3, "source": "src"}]
    del rows[old]["marks"]  # as written before marks existed
    _, restored = _io(storage_dir, _rewind(state, ResumeChoices()))
    assert restored.get(marked).marks == table.get(marked).marks
    assert restored.get(old).marks == []


@pytest.mark.slow
@pytest.mark.parametrize("how", ["sigterm", "sigkill_driver_only"])
def test_aborted_run_then_restored(how, tmp_path, no_leaks):
    """Ctrl-C/SIGTERM, or a killed driver whose actor system notices: the run aborts itself,
    and the final state it writes keeps the unfinished trials resumable."""
    with D.Run(tmp_path, "fifo_slow") as run:
        run.wait_for("trials running and waiting", D.when_state(
            run, lambda st: {"RUNNING", "PENDING"} <= set(D.statuses(st))))
        if how == "sigterm":
            assert run.interrupt() != 0
        else:
            run.kill_driver_only()
    state = run.state()
    assert state is not None and {"PENDING", "RUNNING"} & set(D.statuses(state))
    assert_contiguous(restore_and_fit(run), 6, steps=10)


def test_the_searchers_saved_state_is_cloudpickled_again_only_when_it_changed(tmp_path: Any, monkeypatch: Any) -> None:
    """The state write reuses the searcher's encoded state while its plain pickle is unchanged (a
    search space is cloudpickled once, not every second); a changed state or one only cloudpickle
    can pickle (a lambda) is encoded anew, and each text loads back to what was saved."""
    import cloudpickle

    from actors._legacy import loads

    io, _ = _io(str(tmp_path), None)
    calls: list[object] = []
    real = cloudpickle.dumps
    monkeypatch.setattr(cloudpickle, "dumps", lambda obj, *a, **k: calls.append(obj) or real(obj, *a, **k))

    def back(text: str | None) -> object:
        return loads(base64.b64decode(text or ""))

    space = {"next": 3, "space": {"lr": [0.1, 0.2]}}
    first = io.saved_states.encode("searcher", space)
    assert io.saved_states.encode("searcher", {"next": 3, "space": {"lr": [0.1, 0.2]}}) == first and len(calls) == 1
    moved = io.saved_states.encode("searcher", {**space, "next": 4})
    assert moved != first and back(moved) == {**space, "next": 4} and len(calls) == 2
    assert io.saved_states.encode("stopper", space) == first and len(calls) == 3  # each owner has its own slot
    fn = {"sample": lambda: 7}
    a, b = io.saved_states.encode("searcher", fn), io.saved_states.encode("searcher", fn)
    assert len(calls) == 5 and back(a)["sample"]() == 7 == back(b)["sample"]()  # type: ignore[index]


_LAMBDA_SCRIPT = """
import sys
from actors import RunConfig, TuneConfig, Tuner, report, sample_from, search

def train(config):
    for i in range(1, 3):
        report({"loss": config["a"] / i})

path = sys.argv[2]
if sys.argv[1] == "fit":
    space = {"x": search.uniform(1, 2), "a": sample_from(lambda spec: spec.config["x"] * 10)}
    Tuner(train, param_space=space, tune_config=TuneConfig(num_samples=2, metric="loss", mode="min", seed=1),
          run_config=RunConfig(system="simple", storage=path, name="lam", verbose=0)).fit()
else:
    grid = Tuner.restore(path + "/lam", train).fit()
    print(sorted(round(r.config["a"] / r.config["x"], 6) for r in grid))
"""


def test_a_lambda_in_the_space_of_a_main_script_is_saved_and_restored_in_another_process(tmp_path: Any) -> None:
    """The searcher's state is cloudpickled: a sample_from lambda defined in the script being run
    (__main__) is saved with the experiment and loads in a new interpreter, as in Ray."""
    import subprocess
    import sys

    script = tmp_path / "lam.py"
    script.write_text(_LAMBDA_SCRIPT)
    store = str(tmp_path / "store")
    for step in ("fit", "restore"):
        done = subprocess.run([sys.executable, str(script), step, store], capture_output=True, text=True,
                              timeout=120)
        assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == "[10.0, 10.0]"


def test_a_searcher_without_save_runs_and_restores_anew(tmp_path: Any, caplog: Any) -> None:
    """As Ray Tune's Searcher.save_to_dir does (it logs "save not implemented for Searcher. Skipping
    save." once): a searcher without save()/restore() runs the experiment, its state is not saved
    (warned once), and a restore starts it anew. It used to fail the run at its end."""
    import logging

    from actors import RunConfig, TuneConfig, report
    from actors.search import Searcher

    class NoSave(Searcher):
        def __init__(self) -> None:
            super().__init__()
            self.n = 0

        def suggest(self, trial_id: str) -> Any:
            self.n += 1
            return {"x": self.n} if self.n <= 3 else Searcher.FINISHED

        def on_trial_complete(self, trial_id: str, result: Any = None, error: bool = False) -> None:
            pass

    def train(config: dict[str, Any]) -> None:
        report({"loss": config["x"]})

    with caplog.at_level(logging.WARNING, logger="audition"):
        grid = Tuner(train, tune_config=TuneConfig(search_alg=NoSave(), metric="loss", mode="min", num_samples=3),
                     run_config=RunConfig(system="simple", storage=str(tmp_path), name="nosave", verbose=0)).fit()
    assert len(grid) == 3 and not grid.errors
    warned = [r for r in caplog.records if "does not implement save()" in r.getMessage()]
    assert len(warned) == 1 and "starts it anew" in warned[0].getMessage()
    from storage import ExperimentLayout, StorageContext

    ctx = StorageContext(str(tmp_path))
    state = read_experiment_state(ctx, ExperimentLayout(ctx, "nosave"))
    assert state is not None and state["searcher"] is None and len(state["trials"]) == 3
    again = Tuner.restore(str(tmp_path / "nosave"), train)
    assert len(again.get_results()) == 3


def _three_losses(config: dict[str, Any]) -> None:
    for i in range(3):
        report({"loss": config["x"] + i})


class _InterruptAtSecondResultOfX1(Callback):
    def on_trial_result(self, iteration: int, trials: list[Any], trial: Any, result: dict[str, Any],
                        **info: Any) -> None:
        if trial.config["x"] == 1 and result["training_iteration"] == 2:
            raise KeyboardInterrupt


def test_trials_ended_by_a_restore_free_the_capped_generator(tmp_path: Any) -> None:
    """Ctrl-C while x=0 and x=1 run (the generator, capped by max_concurrent_trials=2, has created
    only them), restored with resume_unfinished=False: both end as saved, and the generator and the
    scheduler are told they completed, so the other four configurations run. Before, the restored
    generator still counted them live and the run ended with "suggested no configuration"."""
    storage = str(tmp_path)
    with pytest.raises(KeyboardInterrupt):
        Tuner(_three_losses, param_space={"x": grid_search([0, 1, 2, 3, 4, 5])},
              tune_config=TuneConfig(max_concurrent_trials=2),
              run_config=RunConfig(name="e", storage=storage, system="simple", verbose=0,
                                   callbacks=[_InterruptAtSecondResultOfX1()])).fit()
    grid = Tuner.restore(os.path.join(storage, "e"), _three_losses, resume_unfinished=False).fit()
    got = sorted((r.config["x"], r.status.value, r.metrics.get("training_iteration")) for r in grid)
    assert [g[:2] for g in got] == [(x, "TERMINATED") for x in range(6)]
    assert got[1][2] == 2 and all(it == 3 for _, _, it in got[2:]), got


def _counts(config: dict[str, Any]) -> None:
    from actors import report

    for _ in range(2):
        report({"v": config["a"]})


def test_restore_takes_param_space_again_with_the_same_keys_as_ray(tmp_path: Any) -> None:
    """Ray 2.60 (Tuner.restore(path, trainable, param_space=...), read in tuner_internal.py): a re-given
    param_space must flatten to the original's keys, else a ValueError naming both; the saved space is used."""
    from actors import RunConfig, Tuner
    from actors.search import grid_search

    space = {"a": grid_search([1, 2]), "nested": {"b": 3}}
    Tuner(_counts, param_space=space, run_config=RunConfig(storage=str(tmp_path), name="ps", system="simple",
                                                           verbose=0)).fit()
    path = str(tmp_path / "ps")
    with pytest.raises(ConfigError, match=r"keys: \['a', 'nested/b'\]; got \['a', 'nested/c'\]"):
        Tuner.restore(path, _counts, param_space={"a": grid_search([1, 2]), "nested": {"c": 3}})
    grid = Tuner.restore(path, _counts, param_space={"nested": {"b": 3}, "a": grid_search([1, 2])}).fit()
    assert sorted(r.config["a"] for r in grid) == [1, 2]


def test_a_snapshot_whose_scheduler_state_never_came_is_not_written_beside_an_older_one(storage_dir):
    """An abort's table snapshot waits for the scheduler's state of the same moment; when that never comes
    (``scheduler_state_lost``), the state stored before (table and scheduler state matched) is kept, and with
    none stored, the snapshot is written without a scheduler state (a restore then starts it afresh)."""
    from actors._engine.store import SearchProgress
    from storage import read_experiment_state

    io, table = _io(storage_dir)
    table.add(f"{io.trial_prefix}_00000", {"x": 1})
    io.snapshot_table(table, None, SearchProgress(1), tag=1)
    io.scheduler_saved(b"knows one trial", 1)
    stored = read_experiment_state(io.ctx, io.layout)
    assert [r["trial_id"] for r in stored["trials"]] == [f"{io.trial_prefix}_00000"]
    table.add(f"{io.trial_prefix}_00001", {"x": 2})
    io.snapshot_table(table, None, SearchProgress(2), tag=2)  # (its SAVE's answer never comes)
    io.scheduler_state_lost()
    io.close(final=True)
    assert read_experiment_state(io.ctx, io.layout) == stored

    io, table = _io(os.path.join(storage_dir, "fresh"))
    table.add(f"{io.trial_prefix}_00000", {"x": 1})
    io.snapshot_table(table, None, SearchProgress(1), tag=1)
    io.scheduler_state_lost()
    io.close(final=True)
    state = read_experiment_state(io.ctx, io.layout)
    assert [r["trial_id"] for r in state["trials"]] == [f"{io.trial_prefix}_00000"]
    assert state["scheduler"] is None


def test_what_a_cloned_trials_runs_committed_unseen_is_deleted_and_numbered_past(storage_dir):
    """A PBT exploit took effect: the trial goes on from another trial's checkpoint. A checkpoint of its own
    committed by a run the controller never heard from (a pause's save whose notice was lost) is of the
    lineage it leaves: deleted, and a later recovery does not resume from it (it did, with the clone's
    config, logging the old lineage's row again: seed 495 of the synchronous PBT sweep)."""
    from actors._engine.lifecycle import TrialRecord
    from storage import list_checkpoints

    io, _ = _io(storage_dir)
    tid = f"{io.trial_prefix}_00000"
    rec = TrialRecord(tid, {})
    known = _commit(io, tid, 0, 3)
    io.max_index[tid] = 0
    _commit(io, tid, 1, 4)  # (the notice of this one never came)
    io.abandon_unseen(rec)
    assert [c.index for c in list_checkpoints(io.ctx, io.layout.trial_dir(tid))] == [known.index]
    assert io.next_checkpoint_index(rec) == 2 and io.recover(rec) is None
