"""The simulator's cheaper storage writes the very bytes a real run writes (actors.testing.sim_store)."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from fsspec.implementations.memory import MemoryFileSystem

from actors._engine.store import SearchProgress
from actors.testing.sim_history import DeferredHistory
from actors.testing.sim_store import SimStateWriter, forget_tree, use_sim_storage
from storage import ExperimentLayout, StateWriter, StorageContext, StorageError, read_experiment_state
from storage._io import write_bytes

_n = itertools.count()


class Score(float):
    """A float subclass (as numpy's float64 is): not a plain value, so encoded at once."""


def _ctx(sim: bool) -> tuple[StorageContext, ExperimentLayout]:
    ctx = StorageContext(f"memory://sim-store-test/{next(_n)}")
    if sim:
        use_sim_storage(ctx)
    return ctx, ExperimentLayout(ctx, "exp")


STATES = [
    {"version": 1, "trials": [{"trial_id": "t0", "config": {"lr": 0.1, "layers": (1, 2)}, "error": None,
                               "last_result": {"loss": float("nan"), "ok": True, "n": 3, "s": "é\n"}}]},
    # a set is stored as a list in its iteration order, which a copy keeps only while its elements do
    # not collide in its hash table (the order is arbitrary in a real run too): one element here
    {"version": 1, "trials": [], "tags": {"a"}, "blob": b"\x00", 7: "int key"},
    {"version": 1, "score": Score(0.25), "nested": [{"x": [Score(1.5)]}]},
]


@pytest.mark.parametrize("state", STATES, ids=["plain", "set-bytes-intkey", "float-subclass"])
def test_the_state_read_back_is_byte_for_byte_a_real_writes(state: dict) -> None:
    real_ctx, real_layout = _ctx(sim=False)
    sim_ctx, sim_layout = _ctx(sim=True)
    clock = iter(range(100)).__next__
    real = StateWriter(real_ctx, real_layout, clock=lambda: 1.0)
    sim = SimStateWriter(sim_ctx, sim_layout, clock=lambda: 1.0)
    history: list[int] = []
    for _ in range(4):  # several versions: the pointer moves, old versions are pruned
        state = dict(state, step=clock(), history=history)
        real_path, sim_path = real.write(state), sim.write(state)
        history.append(len(history))  # changed after the write: not in what was written
    fs = MemoryFileSystem()  # fsspec's own class reads both, as ResultGrid and Tuner.restore do
    assert fs.cat_file(sim_path) == fs.cat_file(real_path)
    assert fs.cat_file(sim_layout.state_pointer).replace(sim_path.rsplit("/", 1)[1].encode(), b"V") == \
        fs.cat_file(real_layout.state_pointer).replace(real_path.rsplit("/", 1)[1].encode(), b"V")
    assert len(fs.ls(sim_layout.state_dir)) == len(fs.ls(real_layout.state_dir)) == 3
    with fs.open(sim_path, "rb") as f:
        assert f.read() == fs.cat_file(real_path)
    assert read_experiment_state(sim_ctx, sim_layout) == read_experiment_state(real_ctx, real_layout)


def test_a_write_below_a_file_or_onto_a_directory_fails_as_on_fsspecs_store() -> None:
    for sim in (False, True):
        ctx, layout = _ctx(sim)
        write_bytes(ctx, layout.experiment_dir + "/f", b"x")
        with pytest.raises(StorageError, match=r"FileExistsError|exists"):
            write_bytes(ctx, layout.experiment_dir + "/f/g", b"y")
        ctx.fs.makedirs(layout.experiment_dir + "/d", exist_ok=True)
        with pytest.raises(StorageError, match=r"IsADirectoryError|directory"):
            write_bytes(ctx, layout.experiment_dir + "/d", b"y")
        if sim:  # the simulator's own writes (states, params.json, histories) refuse the same way
            from actors.testing.sim_store import put_json

            with pytest.raises(StorageError, match=r"FileExistsError|exists"):
                put_json(ctx, layout.experiment_dir + "/f/g", {"a": 1}, None, "writing JSON")
            with pytest.raises(StorageError, match=r"IsADirectoryError|directory"):
                put_json(ctx, layout.experiment_dir + "/d", {"a": 1}, None, "writing JSON")


@pytest.mark.parametrize("config", [{"lr": 0.1, "layers": (1, 2), "act": "relu", "opt": {"beta": [0.9, None]}},
                                    {"lr": Score(0.5)}], ids=["plain", "float-subclass"])
def test_a_trials_params_file_is_byte_for_byte_a_real_writes(config: dict) -> None:
    from actors._engine.lifecycle import TrialRecord
    from actors._shell.experiment_io import ExperimentIO
    from actors.testing.sim_store import SimExperimentIO
    from tests._core_harness import make_spec

    real, sim = ExperimentIO(make_spec()), SimExperimentIO(make_spec())
    use_sim_storage(sim.ctx)
    rec = TrialRecord("t0", config)
    for io in (real, sim):
        io.write_params(rec)
    config["lr"] = 9.0  # changed after the write: not in what was written
    fs = MemoryFileSystem()
    got = fs.cat_file(sim.layout.params_file("t0"))
    assert got == fs.cat_file(real.layout.params_file("t0")) and b"9.0" not in got


def _history_pair(real: Any, path_of: Any) -> tuple[Any, Any, str, str]:
    real_ctx, real_layout = _ctx(sim=False)
    sim_ctx, sim_layout = _ctx(sim=True)
    w_real = real(real_ctx, real_layout, "t0")
    w_sim = DeferredHistory(real, path_of, sim_ctx, sim_layout, "t0")
    return w_real, w_sim, path_of(real_layout, "t0"), path_of(sim_layout, "t0")


@pytest.mark.parametrize("kind", ["json", "csv"])
def test_a_deferred_history_file_holds_what_the_real_writer_writes(kind: str) -> None:
    from storage import CsvWriter, JsonLinesWriter

    real: Any
    real, path_of = {"json": (JsonLinesWriter, ExperimentLayout.result_file),
                     "csv": (CsvWriter, ExperimentLayout.progress_file)}[kind]
    w_real, w_sim, p_real, p_sim = _history_pair(real, path_of)
    fs = MemoryFileSystem()
    row = {"training_iteration": 1, "loss": 0.5, "nested": {"a": 1}}
    script = [
        ("append", [row, dict(row, training_iteration=2, loss=float("inf"))]),
        ("append", [dict(row, training_iteration=3, extra="new column", score=Score(0.1))]),
        ("truncate", 2), ("truncate", 9),
        ("append", [dict(row, training_iteration=3, loss=None, tags={"x"})]),
    ]
    for op, arg in script:
        for w in (w_real, w_sim):
            getattr(w, op)(arg)
            w.flush()
        row["loss"] = -1.0  # the caller reuses its dict: what was appended stays as it was
        assert fs.cat_file(p_sim) == fs.cat_file(p_real), (op, arg)
    w_sim.close()
    w_real.close()
    assert fs.cat_file(p_sim) == fs.cat_file(p_real)
    # a second writer picks up the file (a restored run) and goes on
    w2_real: Any = real(*_ctx_of(w_real), "t0")
    w2_sim: Any = DeferredHistory(real, path_of, *_ctx_of(w_sim), "t0")
    for w in (w2_real, w2_sim):
        w.truncate(2)
        w.append([dict(row, training_iteration=3)])
        w.close()
    assert fs.cat_file(p_sim) == fs.cat_file(p_real)


@pytest.mark.parametrize("kind", ["json", "csv"])
def test_a_history_flushed_again_before_anyone_read_it_holds_exactly_what_was_flushed(kind: str) -> None:
    """Flushes that nobody reads in between update the stored object in place: a read shows every
    row flushed so far and none appended after the last flush, as the real writer's file does."""
    from storage import CsvWriter, JsonLinesWriter

    real: Any
    real, path_of = {"json": (JsonLinesWriter, ExperimentLayout.result_file),
                     "csv": (CsvWriter, ExperimentLayout.progress_file)}[kind]
    w_real, w_sim, p_real, p_sim = _history_pair(real, path_of)
    fs = MemoryFileSystem()
    for i in range(1, 8):
        for w in (w_real, w_sim):
            w.append([{"training_iteration": i, "loss": 1.0 / i, **({"extra": i} if i == 5 else {})}])
            if i % 3 != 2:  # the rows of iteration 2 and 5 wait for the next flush
                w.flush()
        if i in (4, 6):  # read only now and then: flushes in between are not read
            assert fs.cat_file(p_sim) == fs.cat_file(p_real), i
    first = MemoryFileSystem.store[p_sim]
    for w in (w_real, w_sim):
        w.append([{"training_iteration": 8, "loss": 0.1}])
        w.flush()
        w.append([{"training_iteration": 9, "loss": 0.1}])  # appended, never flushed
    assert MemoryFileSystem.store[p_sim] is first  # updated in place (nobody read it since)
    assert fs.cat_file(p_sim) == fs.cat_file(p_real)
    assert b"0.1" in fs.cat_file(p_sim) and fs.cat_file(p_sim).count(b"\n") == fs.cat_file(p_real).count(b"\n")


def _ctx_of(w: Any) -> tuple[StorageContext, ExperimentLayout]:
    ctx = w._ctx
    return ctx, ExperimentLayout(ctx, "exp")


def test_discarding_a_simulation_deletes_its_tree_without_encoding_its_files() -> None:
    ctx, layout = _ctx(sim=True)
    other, _ = _ctx(sim=True)
    SimStateWriter(ctx, layout).write({"version": 1})
    write_bytes(other, other.root + "/kept", b"x")
    ctx.fs.makedirs(layout.experiment_dir + "/empty", exist_ok=True)
    state_file = next(f for p, f in MemoryFileSystem.store.items() if p.startswith(layout.state_dir + "/"))
    forget_tree(ctx)
    assert state_file._blob is not None  # never encoded (fsspec's rm asks every file for its size)
    fs = MemoryFileSystem()
    assert not fs.exists(ctx.root) and fs.cat_file(other.root + "/kept") == b"x"


def test_a_state_reuses_an_unchanged_trials_row_and_reads_back_as_a_real_writes() -> None:
    """``SimExperimentIO`` hands the state writer the same row object while a trial is unchanged
    (its copy is reused); a trial whose result, status or checkpoint changed gets a new row. Every
    state read back is the real writer's (but for the wall-clock ``written_at``)."""
    import json

    from actors._engine.lifecycle import TrialTable
    from actors._engine.trial import TrialStatus
    from actors._shell.experiment_io import ExperimentIO
    from actors.messages import CheckpointRef
    from actors.testing.sim_store import SimExperimentIO
    from tests._core_harness import make_spec

    real, sim = ExperimentIO(make_spec()), SimExperimentIO(make_spec())
    use_sim_storage(sim.ctx)
    sim.state_writer = SimStateWriter(sim.ctx, sim.layout)
    sim.trial_prefix = real.trial_prefix
    table = TrialTable()
    for i in range(3):
        table.add(f"t{i}", {"lr": i / 10})
    t0, t1 = table.get("t0"), table.get("t1")
    rows: list[list[dict[str, Any]]] = []
    fs = MemoryFileSystem()
    steps = [lambda: None,
             lambda: setattr(t0, "last_result", {"loss": 0.5, "training_iteration": 1}),
             lambda: None,
             lambda: table.set_status(t1, TrialStatus.RUNNING),
             lambda: setattr(t1, "checkpoint", CheckpointRef("ck/1", 1, 1, 1.0, {"loss": 0.4}))]
    for tag, change in enumerate(steps):
        change()
        for io in (real, sim):
            io.snapshot_table(table, None, SearchProgress(3), tag)
            io.scheduler_saved(b"scheduler state", tag)
        assert sim.pending_table is None
        states = [json.loads(fs.cat_file(io.layout.state_dir + "/" + json.loads(
            fs.cat_file(io.layout.state_pointer))["latest"])) for io in (real, sim)]
        for s in states:
            s.pop("written_at")
        assert states[0] == states[1], tag
        rows.append([row for _, row in sorted((k, v[1]) for k, v in sim._rows.items())])
    same = [[a is b for a, b in zip(before, after, strict=True)] for before, after in itertools.pairwise(rows)]
    assert same == [[False, True, True], [True, True, True], [True, False, True], [True, False, True]]


def test_the_simulators_json_and_csv_loggers_write_what_the_real_ones_write() -> None:
    """The CSV logger takes the JSON logger's copy of the same rows and leaves the config out when
    the file is made: ``result.json`` and ``progress.csv`` are byte for byte the real loggers'."""
    from actors._driver.loggers import CSVLoggerCallback, JsonLoggerCallback
    from actors._engine.trial import TrialSnapshot, TrialStatus
    from actors.testing.sim_history import defer_histories

    (real_ctx, real_layout), (sim_ctx, sim_layout) = _ctx(sim=False), _ctx(sim=True)
    real: list[Any] = [JsonLoggerCallback(), CSVLoggerCallback()]
    for lg in real:
        lg.setup(real_ctx, real_layout)
    sim: list[Any] = [JsonLoggerCallback(), CSVLoggerCallback()]
    defer_histories(sim, sim_ctx, sim_layout)
    assert sim[0].partner is sim[1]
    trial = TrialSnapshot("t0", {"lr": 0.1}, TrialStatus.RUNNING)
    rows = [{"training_iteration": i, "loss": 1 / i, "config": {"lr": 0.1}} for i in (1, 2, 3)]
    for batch in (rows[:2], rows[2:]):
        for loggers in (real, sim):
            for lg in loggers:
                lg.log_trial_results(0, trial, batch)
        batch[0]["loss"] = -1.0  # changed after it was logged: not in the files
    fs = MemoryFileSystem()
    for lg in (*real, *sim):
        lg.flush()
    for path_of in (ExperimentLayout.result_file, ExperimentLayout.progress_file):
        got = fs.cat_file(path_of(sim_layout, "t0"))
        assert got == fs.cat_file(path_of(real_layout, "t0")) and b"-1.0" not in got
    assert b"lr" not in fs.cat_file(ExperimentLayout.progress_file(sim_layout, "t0"))


def test_a_names_only_listing_is_fsspecs_and_encodes_no_deferred_file() -> None:
    """``SimMemoryFS.ls(detail=False)`` gives fsspec's names (files, directories implied by deeper
    files or made empty, a file's own path) without asking each file its size, which fsspec's listing
    does and which would encode a deferred state or history."""
    ctx, layout = _ctx(sim=True)
    fs, real = ctx.fs, MemoryFileSystem()
    root = layout.experiment_dir
    for rel in ("f", "a/g", "a/b/h", "a/b/c/i"):
        write_bytes(ctx, f"{root}/{rel}", b"x")
    fs.makedirs(f"{root}/empty", exist_ok=True)
    fs.makedirs(f"{root}/a/deep/er", exist_ok=True)
    writer = SimStateWriter(ctx, layout)
    state_path = writer.write({"version": 1, "trials": [{"trial_id": "t0", "config": {}}]})
    names = fs.ls(layout.state_dir, detail=False)
    assert MemoryFileSystem.store[state_path]._blob is not None  # (not encoded: not read, not sized)
    assert names == real.ls(layout.state_dir, detail=False)  # (fsspec's own listing encodes it)
    for path in (root, f"{root}/a", f"{root}/a/b", f"{root}/empty", f"{root}/f"):
        assert fs.ls(path, detail=False) == real.ls(path, detail=False), path
    with pytest.raises(FileNotFoundError):
        fs.ls(f"{root}/missing", detail=False)


def test_a_simulated_checkpoints_manifest_is_byte_for_byte_a_real_commits() -> None:
    """A simulated trial's manifest is stored as a copy and encoded when first read: the bytes of a
    real commit, whatever the metadata's owner changes afterwards."""
    from actors.testing.sim_store import _empty, _put_manifest
    from storage import commit_checkpoint, read_manifest
    from storage._layout import manifest_path

    (real_ctx, real_layout), (sim_ctx, sim_layout) = _ctx(sim=False), _ctx(sim=True)
    rows = [{"training_iteration": 3, "loss": 0.25, "config": {"lr": 0.1}, "done": False}]
    meta: dict[str, Any] = {"iteration": 3, "time_total_s": 3.0, "metrics": {"loss": 0.25}, "results": rows}
    dests = [layout.checkpoint_dir("t0", 0) for layout in (real_layout, sim_layout)]
    commit_checkpoint(real_ctx, dests[0], _empty(), meta, clock=lambda: 1.0)
    commit_checkpoint(sim_ctx, dests[1], _empty(), meta, clock=lambda: 1.0, put_manifest=_put_manifest)
    rows[0]["loss"] = -1.0  # changed after the commit: not in the manifest
    store = MemoryFileSystem.store
    assert store[manifest_path(dests[1])]._blob is not None  # not encoded until read
    fs = MemoryFileSystem()
    got = fs.cat_file(manifest_path(dests[1]))
    assert got == fs.cat_file(manifest_path(dests[0])) and b"-1.0" not in got
    assert read_manifest(sim_ctx, dests[1])["metadata"]["results"][0]["loss"] == 0.25
