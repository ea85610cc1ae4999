"""The storage layer behaves the same on local disk, memory:// and S3 (a real moto server)."""

from __future__ import annotations

import csv
import io
import logging
import os
import pickle
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from storage import (
    CsvWriter,
    ExperimentLayout,
    JsonLinesWriter,
    ResultWriter,
    StateWriter,
    StorageContext,
    StorageError,
    checkpoints_to_delete,
    cleanup_uncommitted,
    commit_checkpoint,
    delete_checkpoint,
    download_checkpoint,
    exists,
    is_committed,
    latest_committed_checkpoint,
    list_checkpoints,
    list_experiment,
    read_bytes,
    read_experiment_state,
    read_json,
    read_manifest,
    read_results,
    write_bytes,
    write_experiment_state,
    write_json,
    write_text,
)
from storage._io import find_files


@pytest.fixture(params=["local", "memory", pytest.param("s3", marks=pytest.mark.s3)])
def ctx(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StorageContext]:
    if request.param == "local":
        yield StorageContext(str(tmp_path / "results"))
    elif request.param == "memory":
        context = StorageContext(f"memory://audition-test-{uuid.uuid4().hex}")
        yield context
        if context.fs.exists(context.root):
            context.fs.rm(context.root, recursive=True)
    else:
        url, options = request.getfixturevalue("s3_location")
        yield StorageContext(url, options)


def make_tree(root: Path, files: dict[str, bytes]) -> Path:
    for rel, data in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return root


def read_tree(root: Path) -> dict[str, bytes]:
    return {
        p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
    }


TREE = {
    "model.bin": os.urandom(70_000),
    "empty.txt": b"",
    "nested/deeper/state[1].json": b'{"step": 3}',
    "nested/notes*?.txt": b"glob characters are plain names",
}


class TestBackends:
    def test_layout_paths_live_under_the_root(self, ctx: StorageContext) -> None:
        layout = ExperimentLayout(ctx, "exp")
        assert layout.experiment_dir == ctx.join("exp")
        assert layout.trial_dir("t1") == ctx.join("exp", "t1")
        assert layout.checkpoint_dir("t1", 7).endswith("/exp/t1/checkpoint_000007")
        assert ctx.uri(layout.result_file("t1")) == ctx.url.rstrip("/") + "/exp/t1/result.json"

    def test_check_usable_and_pickle(self, ctx: StorageContext) -> None:
        ctx.check_usable()
        clone = pickle.loads(pickle.dumps(ctx))
        assert (clone.url, clone.options, clone.root) == (ctx.url, ctx.options, ctx.root)
        write_text(clone, clone.join("hello.txt"), "hi")
        assert read_bytes(ctx, ctx.join("hello.txt")) == b"hi"
        assert [p for p in find_files(ctx, ctx.root) if ".audition_probe" in p] == []

    def test_checkpoint_round_trip_with_nested_dirs(self, ctx: StorageContext, tmp_path: Path) -> None:
        layout = ExperimentLayout(ctx, "exp")
        dest = layout.checkpoint_dir("t[1]", 0)
        local = make_tree(tmp_path / "ckpt", TREE)
        manifest = commit_checkpoint(ctx, dest, str(local), {"iteration": 4, "metrics": {"acc": 0.5}},
                                     clock=lambda: 123.0)
        assert manifest["committed_at"] == 123.0
        assert sorted(f["path"] for f in manifest["files"]) == sorted(TREE)
        assert {f["path"]: f["size"] for f in manifest["files"]}["model.bin"] == 70_000
        assert is_committed(ctx, dest)
        assert read_manifest(ctx, dest)["metadata"] == {"iteration": 4, "metrics": {"acc": 0.5}}
        out = tmp_path / "restored"
        assert download_checkpoint(ctx, dest, str(out)) == {"iteration": 4, "metrics": {"acc": 0.5}}
        assert read_tree(out) == TREE
        [info] = list_checkpoints(ctx, layout.trial_dir("t[1]"))
        assert (info.index, info.committed, info.path) == (0, True, dest)

    def test_recommit_replaces_old_files(self, ctx: StorageContext, tmp_path: Path) -> None:
        dest = ctx.join("exp", "t", "checkpoint_000001")
        commit_checkpoint(ctx, dest, str(make_tree(tmp_path / "a", {"x": b"old", "y": b"old"})), {"v": 1})
        commit_checkpoint(ctx, dest, str(make_tree(tmp_path / "b", {"x": b"new"})), {"v": 2})
        out = tmp_path / "out"
        assert download_checkpoint(ctx, dest, str(out)) == {"v": 2}
        assert read_tree(out) == {"x": b"new"}

    def test_recommit_after_the_trial_dir_was_forgotten_uncommits_first(
        self, ctx: StorageContext, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A process keeps what it knows of a bounded number of trial dirs; one it forgot is listed
        again, so a commit over its existing checkpoint still deletes the old manifest before any
        upload (a crash mid-upload leaves no checkpoint, never old files mixed with new ones)."""
        from storage import _checkpoint

        monkeypatch.setattr(_checkpoint, "KNOWN_DIRS_MAX", 2)
        monkeypatch.setattr(_checkpoint, "_known_dirs", type(_checkpoint._known_dirs)())
        layout = ExperimentLayout(ctx, "exp")
        dest = layout.checkpoint_dir("a", 1)
        commit_checkpoint(ctx, dest, str(make_tree(tmp_path / "old", {"x": b"old", "y": b"old"})), {"v": 1})
        for other in ("b", "c", "d"):
            commit_checkpoint(ctx, layout.checkpoint_dir(other, 1), str(make_tree(tmp_path / other, {"z": b"1"})), {})
        assert len(_checkpoint._known_dirs) == 2  # bounded: the process forgot "a"

        class Killed(BaseException):
            """The process dies mid-upload: no clean-up runs."""

        def dying_put(*args: object, **kwargs: object) -> None:
            raise Killed()

        monkeypatch.setattr(ctx.fs, "put_file", dying_put)
        with pytest.raises(Killed):
            commit_checkpoint(ctx, dest, str(make_tree(tmp_path / "new", {"x": b"new"})), {"v": 2})
        assert not is_committed(ctx, dest)

    def test_directory_without_manifest_is_not_a_checkpoint(
        self, ctx: StorageContext, tmp_path: Path
    ) -> None:
        layout = ExperimentLayout(ctx, "exp")
        trial = layout.trial_dir("t1")
        good = layout.checkpoint_dir("t1", 1)
        half = layout.checkpoint_dir("t1", 2)
        commit_checkpoint(ctx, good, str(make_tree(tmp_path / "c", {"w": b"1"})), {})
        write_bytes(ctx, f"{half}/w", b"partial upload")
        write_bytes(ctx, f"{half}/sub/more", b"partial upload")
        write_bytes(ctx, f"{trial}/not_a_checkpoint/file", b"x")
        assert not is_committed(ctx, half)
        infos = list_checkpoints(ctx, trial)
        assert [(i.index, i.committed) for i in infos] == [(1, True), (2, False)]
        assert latest_committed_checkpoint(ctx, trial) == infos[0]
        with pytest.raises(StorageError, match="not a committed checkpoint"):
            read_manifest(ctx, half)
        with pytest.raises(StorageError, match="not a committed checkpoint"):
            download_checkpoint(ctx, half, str(tmp_path / "nope"))
        assert cleanup_uncommitted(ctx, trial) == [half]
        assert [(i.index, i.committed) for i in list_checkpoints(ctx, trial)] == [(1, True)]
        assert find_files(ctx, half) == {}
        assert exists(ctx, f"{trial}/not_a_checkpoint/file")

    def test_delete_checkpoint_removes_manifest_and_files(self, ctx: StorageContext, tmp_path: Path) -> None:
        dest = ctx.join("exp", "t", "checkpoint_000000")
        commit_checkpoint(ctx, dest, str(make_tree(tmp_path / "c", TREE)), {})
        delete_checkpoint(ctx, dest)
        assert not is_committed(ctx, dest)
        assert find_files(ctx, dest) == {}
        assert list_checkpoints(ctx, ctx.join("exp", "t")) == []
        assert latest_committed_checkpoint(ctx, ctx.join("exp", "t")) is None

    def test_retention_keeps_best_latest_and_protected(self, ctx: StorageContext, tmp_path: Path) -> None:
        layout = ExperimentLayout(ctx, "exp")
        local = str(make_tree(tmp_path / "c", {"w": b"weights"}))
        scores = [0.9, 0.1, 0.5, 0.95, 0.2, 0.3]
        for index, score in enumerate(scores):
            commit_checkpoint(ctx, layout.checkpoint_dir("t", index), local, {"metrics": {"acc": score}})
        infos = list_checkpoints(ctx, layout.trial_dir("t"))
        protected = {layout.checkpoint_dir("t", 1)}
        doomed = checkpoints_to_delete(infos, 2, "acc", "max", protected)
        assert [i.index for i in doomed] == [2, 4]  # keep best 0 and 3, latest 5, protected 1
        for info in doomed:
            delete_checkpoint(ctx, info.path)
        remaining = list_checkpoints(ctx, layout.trial_dir("t"))
        assert [(i.index, i.committed) for i in remaining] == [(0, True), (1, True), (3, True), (5, True)]

    def test_results_append_truncate_and_csv(self, ctx: StorageContext) -> None:
        layout = ExperimentLayout(ctx, "exp")
        writer = ResultWriter(ctx, layout, "t1", flush_interval=0.0)
        writer.append([{"training_iteration": 1, "loss": 1.0}])
        writer.append([{"training_iteration": 2, "loss": 0.5, "extra": {"a": 1}},
                       {"training_iteration": 3, "loss": 0.25, "note": "x,y"}])
        writer.flush()
        rows = read_results(ctx, layout, "t1")
        assert [r["training_iteration"] for r in rows] == [1, 2, 3]
        assert rows[1]["extra"] == {"a": 1}
        table = list(csv.reader(io.StringIO(read_bytes(ctx, layout.progress_file("t1")).decode())))
        assert table[0] == ["training_iteration", "loss", "extra/a", "note"]
        assert table[1] == ["1", "1.0", "", ""]
        assert table[3] == ["3", "0.25", "", "x,y"]
        writer.truncate(1)
        assert [r["training_iteration"] for r in read_results(ctx, layout, "t1")] == [1]
        writer.append([{"training_iteration": 2, "loss": 0.4}])
        writer.close()
        assert [r["loss"] for r in read_results(ctx, layout, "t1")] == [1.0, 0.4]
        table = list(csv.reader(io.StringIO(read_bytes(ctx, layout.progress_file("t1")).decode())))
        assert len(table) == 3
        with pytest.raises(StorageError, match="closed"):
            writer.append([{"training_iteration": 3}])

    def test_a_rewind_drops_only_the_trailing_rows_past_it(self, ctx: StorageContext) -> None:
        # a PBT clone's rows go on from its source's checkpoint (iteration 2) after its own 1-4, as in
        # Ray 2.60; a retry of the clone from its checkpoint at 3 rewinds that run, not the rows before
        layout = ExperimentLayout(ctx, "exp")
        writer = ResultWriter(ctx, layout, "t1", flush_interval=0.0)
        writer.append([{"training_iteration": i} for i in (1, 2, 3, 4, 3, 4, 5)])
        writer.truncate(3)
        writer.close()
        assert [r["training_iteration"] for r in read_results(ctx, layout, "t1")] == [1, 2, 3, 4, 3]
        table = list(csv.reader(io.StringIO(read_bytes(ctx, layout.progress_file("t1")).decode())))
        assert table == [["training_iteration"], ["1"], ["2"], ["3"], ["4"], ["3"]]

    def test_results_tolerate_torn_last_line(self, ctx: StorageContext) -> None:
        layout = ExperimentLayout(ctx, "exp")
        torn = b'{"training_iteration": 1}\n{"training_iteration": 2}\n{"training_iter'
        write_bytes(ctx, layout.result_file("t1"), torn)
        assert [r["training_iteration"] for r in read_results(ctx, layout, "t1")] == [1, 2]
        writer = ResultWriter(ctx, layout, "t1", flush_interval=0.0)  # a restarted controller
        writer.append([{"training_iteration": 3}])
        writer.close()
        assert [r["training_iteration"] for r in read_results(ctx, layout, "t1")] == [1, 2, 3]
        assert read_bytes(ctx, layout.result_file("t1")).endswith(b"}\n")
        table = list(csv.reader(io.StringIO(read_bytes(ctx, layout.progress_file("t1")).decode())))
        assert table == [["training_iteration"], ["1"], ["2"], ["3"]]

    def test_csv_writer_alone_widens_truncates_and_repairs(self, ctx: StorageContext) -> None:
        layout = ExperimentLayout(ctx, "exp")

        def table() -> list[list[str]]:
            return list(csv.reader(io.StringIO(read_bytes(ctx, layout.progress_file("t1")).decode())))

        w = CsvWriter(ctx, layout, "t1", flush_interval=0.0)
        w.append([{"training_iteration": 1, "loss": 1.0}])
        w.append([{"training_iteration": 2, "loss": 0.5, "extra": {"a": 1}}])
        w.flush()
        assert table() == [["training_iteration", "loss", "extra/a"], ["1", "1.0", ""], ["2", "0.5", "1"]]
        w.truncate(1)
        assert table() == [["training_iteration", "loss", "extra/a"], ["1", "1.0", ""]]
        w.close()
        # a crash tore the last line: a new writer (restarted controller) drops it and appends cleanly
        write_bytes(ctx, layout.progress_file("t1"), read_bytes(ctx, layout.progress_file("t1")) + b"2,0.")
        w = CsvWriter(ctx, layout, "t1", flush_interval=0.0)
        assert w.row_count == 1
        w.append([{"training_iteration": 2, "loss": 0.25}])
        w.close()
        assert table() == [["training_iteration", "loss", "extra/a"], ["1", "1.0", ""], ["2", "0.25", ""]]

    def test_result_writer_rebuilds_a_csv_left_behind_by_a_crash(self, ctx: StorageContext) -> None:
        layout = ExperimentLayout(ctx, "exp")
        rows = [{"training_iteration": i, "loss": 1.0 / i} for i in (1, 2, 3)]
        json_only = JsonLinesWriter(ctx, layout, "t1", flush_interval=0.0)
        json_only.append(rows)  # killed before the CSV append of the same batch
        json_only.close()
        w = ResultWriter(ctx, layout, "t1", flush_interval=0.0)  # what a restore truncates with
        w.truncate(2)
        w.close()
        table = list(csv.reader(io.StringIO(read_bytes(ctx, layout.progress_file("t1")).decode())))
        assert table == [["training_iteration", "loss"], ["1", "1.0"], ["2", "0.5"]]
        assert [r["training_iteration"] for r in read_results(ctx, layout, "t1")] == [1, 2]

    def test_results_buffer_until_flush_interval_on_object_stores(self, ctx: StorageContext) -> None:
        layout = ExperimentLayout(ctx, "exp")
        now = [100.0]
        writer = ResultWriter(ctx, layout, "t1", flush_interval=2.0, clock=lambda: now[0])

        def stored() -> int:
            return len(read_results(ctx, layout, "t1"))

        writer.append([{"training_iteration": 1}])
        assert stored() == 1  # the first row is written at once so progress shows up early
        now[0] = 101.0
        writer.append([{"training_iteration": 2}])
        assert stored() == (2 if ctx.is_local else 1)
        now[0] = 102.5
        writer.maybe_flush()
        assert stored() == 2
        writer.append([{"training_iteration": 3}])
        writer.close()
        assert stored() == 3

    def test_experiment_state_versions_and_pruning(self, ctx: StorageContext) -> None:
        layout = ExperimentLayout(ctx, "exp")
        assert read_experiment_state(ctx, layout) is None
        paths = [write_experiment_state(ctx, layout, {"n": n}) for n in range(5)]
        assert read_experiment_state(ctx, layout) == {"n": 4}
        assert read_json(ctx, layout.state_pointer)["latest"] == paths[-1].rsplit("/", 1)[1]
        left = sorted(p.rsplit("/", 1)[1] for p in find_files(ctx, layout.state_dir))
        assert left == sorted(p.rsplit("/", 1)[1] for p in paths[-3:])

    def test_a_state_writer_lists_versions_once_and_retries_a_failed_prune(
        self, ctx: StorageContext, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """The controller's writer looks at storage once, then knows its versions: same files as
        write_experiment_state, one listing; a version it could not prune is deleted next time."""
        import storage._state as state_module

        layout = ExperimentLayout(ctx, "exp")
        first = write_experiment_state(ctx, layout, {"n": 0})  # an earlier controller's version
        listings = []
        real_versions, real_remove = state_module._versions, state_module.remove_file
        monkeypatch.setattr(state_module, "_versions", lambda *a: listings.append(1) or real_versions(*a))
        failing = {first}

        def remove(ctx_: StorageContext, path: str, **kw: object) -> None:
            if path in failing:
                failing.discard(path)
                raise StorageError("simulated delete failure", url=path)
            real_remove(ctx_, path, **kw)

        monkeypatch.setattr(state_module, "remove_file", remove)
        writer = StateWriter(ctx, layout)
        paths = [first] + [writer.write({"n": n}) for n in range(1, 5)]
        assert listings == [1]
        assert [ExperimentLayout.parse_state_version(p) for p in paths] == [0, 1, 2, 3, 4]
        assert read_experiment_state(ctx, layout) == {"n": 4}
        left = sorted(p.rsplit("/", 1)[1] for p in find_files(ctx, layout.state_dir))
        assert left == sorted(p.rsplit("/", 1)[1] for p in paths[-3:])  # version 0 went at the 2nd try

    def test_crash_before_pointer_keeps_previous_state(self, ctx: StorageContext) -> None:
        layout = ExperimentLayout(ctx, "exp")
        write_experiment_state(ctx, layout, {"n": 1})
        orphan = layout.state_version(1, "abcd")  # written completely, pointer never moved
        write_json(ctx, orphan, {"n": 2})
        assert read_experiment_state(ctx, layout) == {"n": 1}
        newer = write_experiment_state(ctx, layout, {"n": 3})
        assert ExperimentLayout.parse_state_version(newer) == 2
        assert read_experiment_state(ctx, layout) == {"n": 3}

    def test_corrupt_pointer_falls_back_to_newest_readable(
        self, ctx: StorageContext, caplog: pytest.LogCaptureFixture
    ) -> None:
        layout = ExperimentLayout(ctx, "exp")
        write_experiment_state(ctx, layout, {"n": 1})
        second = write_experiment_state(ctx, layout, {"n": 2})
        write_bytes(ctx, layout.state_pointer, b'{"latest": "experiment_sta')
        with caplog.at_level(logging.WARNING, logger="storage"):
            assert read_experiment_state(ctx, layout) == {"n": 2}
        assert "using" in caplog.text
        write_bytes(ctx, second, b"{torn")  # newest version unreadable too: use the one before
        assert read_experiment_state(ctx, layout) == {"n": 1}

    def test_all_state_versions_corrupt_is_a_clear_error(self, ctx: StorageContext) -> None:
        layout = ExperimentLayout(ctx, "exp")
        versions = [write_experiment_state(ctx, layout, {"n": n}) for n in range(2)]
        for path in [*versions, layout.state_pointer]:
            write_bytes(ctx, path, b"\x00garbage")
        with pytest.raises(StorageError, match="corrupted experiment state at") as info:
            read_experiment_state(ctx, layout)
        assert ctx.uri(layout.experiment_dir) in str(info.value)

    def test_list_experiment_and_small_files(self, ctx: StorageContext) -> None:
        layout = ExperimentLayout(ctx, "exp")
        assert list_experiment(ctx, layout) == []
        write_json(ctx, layout.params_file("b[2]"), {"lr": 0.1})
        write_json(ctx, layout.params_file("a"), {"lr": 0.2})
        write_text(ctx, layout.error_file("a"), "Traceback: boom\n")
        write_experiment_state(ctx, layout, {"trials": 2})
        write_bytes(ctx, layout.tuner_file, b"pickled")
        assert list_experiment(ctx, layout) == ["a", "b[2]"]
        assert read_json(ctx, layout.params_file("b[2]")) == {"lr": 0.1}
        assert read_bytes(ctx, layout.error_file("a")) == b"Traceback: boom\n"
        assert exists(ctx, layout.tuner_file) and not exists(ctx, layout.params_file("zzz"))
        assert read_json(ctx, layout.params_file("zzz"), default=None) is None
        with pytest.raises(StorageError, match="does not exist"):
            read_json(ctx, layout.params_file("zzz"))
        with pytest.raises(FileNotFoundError):
            read_bytes(ctx, layout.params_file("zzz"))
        write_bytes(ctx, layout.params_file("c"), b"{nope")
        with pytest.raises(StorageError, match="not valid JSON"):
            read_json(ctx, layout.params_file("c"))

    def test_failed_commit_leaves_no_checkpoint(
        self, ctx: StorageContext, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        dest = ctx.join("exp", "t", "checkpoint_000000")
        real_put = ctx.fs.put_file
        calls: list[str] = []

        def failing_put(lpath: str, rpath: str, **kwargs: object) -> None:
            calls.append(rpath)
            if len(calls) == 3:
                raise PermissionError(13, "injected: permission denied")
            real_put(lpath, rpath, **kwargs)

        monkeypatch.setattr(ctx.fs, "put_file", failing_put)
        with pytest.raises(StorageError, match="permission denied") as info:
            commit_checkpoint(ctx, dest, str(make_tree(tmp_path / "c", TREE)), {})
        assert ctx.uri(dest) in str(info.value)
        monkeypatch.undo()
        assert not is_committed(ctx, dest)
        assert find_files(ctx, dest) == {}


def test_list_names_gives_what_list_dir_names(ctx: StorageContext) -> None:
    """``list_names`` (a checkpoint commit's "may this directory exist" check) lists the same children
    as ``list_dir``, without their details; nothing for a missing directory."""
    from storage._io import list_dir, list_names, write_bytes

    base = ctx.root.rstrip("/") + "/names"
    for rel in ("a.json", "b/c.json", "b/d/e.json"):
        write_bytes(ctx, f"{base}/{rel}", b"{}")
    for path in (base, f"{base}/b"):
        assert sorted(list_names(ctx, path)) == sorted(e["name"] for e in list_dir(ctx, path))
    assert {n.rstrip("/").rsplit("/", 1)[1] for n in list_names(ctx, base)} == {"a.json", "b"}
    assert list_names(ctx, f"{base}/missing") == []
