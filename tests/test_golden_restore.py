"""Experiments saved by an earlier audition still restore with today's code.

``tests/data/golden/`` holds experiments saved by the code before ``actors/`` was split into
packages (``make_golden.py`` says how and with which commit): their pickles name classes by the
old module paths (``actors._config``, ``actors._spec``, ``actors._trial``, ...), which
``actors/_legacy.py`` maps. Each test restores a copy in ``tmp_path``, under another name, so the
experiment has also moved since it was saved; the golden files are never written.
"""

from __future__ import annotations

import io
import json
import os
import shutil
from contextlib import redirect_stdout
from typing import Any

import pytest

from actors import Tuner
from actors._engine.trial import TrialStatus
from storage import ExperimentLayout, StorageContext, read_experiment_state, read_results
from tests.golden_trainables import counter, pbt_counter

GOLDEN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "golden")


def _files(root: str) -> dict[str, int]:
    return {os.path.relpath(os.path.join(d, f), root): os.path.getsize(os.path.join(d, f))
            for d, _, fs in os.walk(root) for f in fs}


@pytest.fixture
def golden_copy(tmp_path):
    """``copy(name)``: the golden experiment ``name`` copied to a new place; checks afterwards that
    the golden directory itself was left as it was."""
    before = _files(GOLDEN)

    def copy(name: str) -> str:
        dst = str(tmp_path / "moved" / f"{name}_copy")
        shutil.copytree(os.path.join(GOLDEN, name), dst)
        return dst

    yield copy
    assert _files(GOLDEN) == before, "a restore wrote into tests/data/golden"


def _saved(path: str) -> tuple[dict[str, Any], dict[str, list[dict[str, Any]]]]:
    """The saved state and every trial's saved history, read before anything restores."""
    ctx = StorageContext(os.path.dirname(path))
    layout = ExperimentLayout(ctx, os.path.basename(path))
    state = read_experiment_state(ctx, layout)
    assert state is not None
    return state, {r["trial_id"]: read_results(ctx, layout, r["trial_id"]) for r in state["trials"]}


def _iterations(result: Any) -> list[int]:
    return [h["training_iteration"] for h in result.metrics_history]


def _assert_contiguous(result: Any) -> None:
    """History 1..N exactly once; the trainable's own step agrees (resumed from the right checkpoint)."""
    its = _iterations(result)
    assert its == list(range(1, len(its) + 1)), (result.trial_id, its)
    assert [h["step"] for h in result.metrics_history] == [i - 1 for i in its], result.trial_id


def _assert_checkpoint_inside(result: Any, path: str) -> None:
    assert result.checkpoint is not None, result.trial_id
    assert result.checkpoint.path.startswith(path + os.sep), (result.trial_id, result.checkpoint.path)


def test_aborted_asha_experiment_resumes(golden_copy):
    """Aborted mid-way (2 trials done, 2 running with checkpoints, 2 never suggested): the restore
    keeps the finished ones, continues the running ones from their checkpoints, and the restored
    searcher suggests the remaining two; ASHA's and the stopper's limits still hold."""
    path = golden_copy("asha_aborted")
    state, saved = _saved(path)
    rows = {r["trial_id"]: r for r in state["trials"]}
    statuses = sorted(r["status"] for r in rows.values())
    assert statuses == ["RUNNING", "RUNNING", "TERMINATED", "TERMINATED"] and state["suggested"] == 4
    assert Tuner.can_restore(path)

    grid = Tuner.restore(path, counter).fit()

    by_id = {r.trial_id: r for r in grid}
    assert len(by_id) == 6 and set(rows) < set(by_id)
    assert sorted(by_id) == [f"{state['trial_prefix']}_{i:05d}" for i in range(6)]
    for r in grid:
        assert r.status is TrialStatus.TERMINATED and r.error is None, (r.trial_id, r.status, r.error)
        _assert_contiguous(r)
        assert 2 <= _iterations(r)[-1] <= 6, r.trial_id  # ASHA's grace period, max_t and the stopper
        _assert_checkpoint_inside(r, path)
        assert r.checkpoint.to_dict()["step"] == _iterations(r)[-1] - 1
    for tid, row in rows.items():
        history = by_id[tid].metrics_history
        assert by_id[tid].config == row["config"]
        if row["status"] == "TERMINATED":  # not run again
            assert history == saved[tid], tid
            continue
        at = row["checkpoint"]["iteration"]
        assert history[:at] == saved[tid][:at], tid  # the aborted run's rows up to its checkpoint
        assert len(history) > at, (tid, at)  # and it went on from that checkpoint, not from scratch
        assert {h["resumed_from"] for h in history[at:]} == {at - 1}, (tid, history)
    new = [by_id[t] for t in sorted(set(by_id) - set(rows))]
    assert all(h["resumed_from"] == -1 for r in new for h in r.metrics_history)
    xs = [r.config["x"] for r in grid]
    assert len(set(xs)) == 6 and all(0.1 <= x <= 1.0 for x in xs)


def test_finished_pbt_experiment_reads(golden_copy):
    """A finished PBT experiment: its ResultGrid (without running, and from fit(), which runs
    nothing more) and ``audition status`` read it, checkpoints at its new place."""
    path = golden_copy("pbt_finished")
    state, saved = _saved(path)
    assert {r["status"] for r in state["trials"]} == {"TERMINATED"}
    assert any(m["kind"] == "exploit" for r in state["trials"] for m in r.get("marks", []))

    tuner = Tuner.restore(path, pbt_counter)
    for grid in (tuner.get_results(), tuner.fit()):
        assert len(grid) == 4 and grid.num_errors == 0
        for r in grid:
            assert r.status is TrialStatus.TERMINATED, (r.trial_id, r.status)
            assert r.metrics_history == saved[r.trial_id]
            _assert_checkpoint_inside(r, path)
            assert r.checkpoint.to_dict()["step"] == r.metrics["step"]
        best = grid.get_best_result()
        assert best.metrics["loss"] == min(r.metrics["loss"] for r in grid)

    from actors._cli.main import main

    out = io.StringIO()
    with redirect_stdout(out):
        assert main(["status", path, "--json"]) == 0
    doc = json.loads(out.getvalue())
    assert (doc["metric"], doc["mode"], doc["trainable"], doc["notes"]) == ("loss", "min", "pbt_counter", [])
    assert doc["counts"] == {"TERMINATED": 4} and doc["best"]["trial_id"] == best.trial_id


def test_golden_pickles_name_old_module_paths():
    """The golden pickles (tuner.pkl, and the searcher's, stopper's and scheduler's saved state)
    name modules that no longer exist; every one of them loads through ``actors._legacy``. Were
    the golden data remade with today's code, the restore tests above would prove nothing."""
    import base64
    import glob

    from actors import _legacy

    seen: set[str] = set()

    class Recording(_legacy._Unpickler):
        def find_class(self, module: str, name: str) -> Any:
            seen.add(module)
            return super().find_class(module, name)

    def load(blob: bytes) -> None:
        obj = Recording(io.BytesIO(blob)).load()
        for value in (vars(obj.get("spec")) if isinstance(obj, dict) and "spec" in obj else {}).values():
            if isinstance(value, bytes) and value[:1] == b"\x80":  # the scheduler, searcher, stopper
                load(value)

    for name in ("asha_aborted", "pbt_finished"):
        with open(os.path.join(GOLDEN, name, "tuner.pkl"), "rb") as f:
            load(f.read())
        for version in glob.glob(os.path.join(GOLDEN, name, ".state", "*.json")):
            with open(version) as f:
                state = json.load(f)
            for key in ("searcher", "stopper", "scheduler"):
                if state.get(key):
                    load(base64.b64decode(state[key]))
    old = {m for m in seen if m in _legacy.MOVED}
    assert {"actors._config", "actors._spec", "actors._trial"} <= old, sorted(seen)
