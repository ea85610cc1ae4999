"""A committed checkpoint's directory holds the user's files only, as Ray's do.

Recorded from Ray 2.60 (``/work/rayvenv``, a probe script: a function trainable reporting
``model.txt`` and ``sub/w.bin`` per iteration and a class trainable saving ``model.txt`` with
``checkpoint_frequency=1``, each failing once with ``FailureConfig(max_failures=1)``; local storage
and ``storage_path`` on a moto S3 server): ``get_checkpoint().as_directory()``,
``load_checkpoint(dir)``, ``Result.checkpoint.as_directory()``, ``.to_directory()`` and
``os.listdir(Result.checkpoint.path)`` list exactly the user's files (``["model.txt"]`` for the
class), plus ``.metadata.json`` only where ``set_metadata`` was called. audition's manifest sits
beside the directory (``.checkpoint_NNNNNN.audition_manifest.json``); checkpoints committed by
earlier versions keep theirs inside and still count.
"""

from __future__ import annotations

import json
import os
from typing import Any

import pytest

from actors import CheckpointConfig, FailureConfig, RunConfig, Trainable, Tuner
from storage import (
    MANIFEST_NAME,
    StorageContext,
    cleanup_uncommitted,
    commit_checkpoint,
    delete_checkpoint,
    download_checkpoint,
    is_committed,
    list_checkpoints,
    manifest_path,
    read_manifest,
    read_user_metadata,
    write_user_metadata,
)

_RAY_CLASS_FILES = ["model.txt"]  # recorded from Ray 2.60 in every view (see the module docstring)


class FailsOnceAtTwo(Trainable):
    """Saves ``model.txt`` each iteration; the first run raises at iteration 2, the retry loads
    the iteration-1 checkpoint and reports which files ``load_checkpoint`` was given."""

    def setup(self, config: dict[str, Any]) -> None:
        self.i = 0
        self.loaded: list[str] = []

    def step(self) -> dict[str, Any]:
        self.i += 1
        flag = self.config["flag"]
        if self.i == 2 and not os.path.exists(flag):
            open(flag, "w").close()
            raise RuntimeError("planned failure: the retry loads checkpoint_000000")
        return {"score": self.i, "loaded": self.loaded, "done": self.i >= 3}

    def save_checkpoint(self, checkpoint_dir: str) -> None:
        with open(os.path.join(checkpoint_dir, "model.txt"), "w") as f:
            f.write(str(self.i))

    def load_checkpoint(self, checkpoint_dir: str) -> None:
        self.loaded = sorted(os.listdir(checkpoint_dir))
        with open(os.path.join(checkpoint_dir, "model.txt")) as f:
            self.i = int(f.read())


def test_every_view_of_a_class_checkpoint_holds_the_users_files_only(storage_dir, tmp_path, no_leaks) -> None:
    grid = Tuner(FailsOnceAtTwo, param_space={"flag": str(tmp_path / "failed")}, run_config=RunConfig(
        name="views", storage=storage_dir, verbose=0, failure_config=FailureConfig(max_failures=1),
        checkpoint_config=CheckpointConfig(checkpoint_frequency=1))).fit()
    r = grid[0]
    assert r.error is None and r.metrics["training_iteration"] == 3
    assert r.metrics["loaded"] == _RAY_CLASS_FILES  # load_checkpoint(dir) in the retry
    assert r.checkpoint is not None
    assert sorted(os.listdir(r.checkpoint.path)) == _RAY_CLASS_FILES
    with r.checkpoint.as_directory() as d:
        assert sorted(os.listdir(d)) == _RAY_CLASS_FILES
    assert sorted(os.listdir(r.checkpoint.to_directory(str(tmp_path / "copy")))) == _RAY_CLASS_FILES
    assert is_committed(StorageContext(r.checkpoint.path), StorageContext(r.checkpoint.path).root)


# ------------------------------------------------------------------------------- the storage layer
@pytest.fixture(params=["local", "memory", pytest.param("s3", marks=pytest.mark.s3)])
def ctx(request, tmp_path) -> StorageContext:
    if request.param == "local":
        return StorageContext(str(tmp_path / "store"))
    if request.param == "s3":
        url, options = request.getfixturevalue("s3_location")
        return StorageContext(url, options)
    import uuid

    return StorageContext(f"memory://ckfiles-{uuid.uuid4().hex}")


def _src(tmp_path: Any, name: str = "src") -> str:
    d = tmp_path / name
    (d / "sub").mkdir(parents=True)
    (d / "model.txt").write_text("m")
    (d / "sub" / "w.bin").write_text("w")
    return str(d)


def _files(ctx: StorageContext, path: str) -> list[str]:
    ctx.fs.invalidate_cache()
    return sorted(p[len(path.rstrip("/")) + 1:] for p in ctx.fs.find(path))


def test_a_commit_leaves_the_directory_to_the_users_files(ctx, tmp_path) -> None:
    dest = f"{ctx.root}/t/checkpoint_000000"
    commit_checkpoint(ctx, dest, _src(tmp_path), {"iteration": 1})
    assert _files(ctx, dest) == ["model.txt", "sub/w.bin"]
    assert ctx.fs.isfile(manifest_path(dest)) and manifest_path(dest).endswith("/t/.checkpoint_000000" + MANIFEST_NAME)
    assert is_committed(ctx, dest)
    out = download_checkpoint(ctx, dest, str(tmp_path / "dl"))
    assert out == {"iteration": 1} and sorted(os.listdir(tmp_path / "dl")) == ["model.txt", "sub"]
    write_user_metadata(ctx, dest, {"k": 1})  # a later set_metadata: listed in the manifest beside
    assert _files(ctx, dest) == [".metadata.json", "model.txt", "sub/w.bin"]
    assert ".metadata.json" in [e["path"] for e in read_manifest(ctx, dest)["files"]]


def test_files_without_a_manifest_beside_them_are_not_a_checkpoint(ctx, tmp_path) -> None:
    """An upload cut short (files, no manifest yet), and a user's own file named like the old
    manifest: neither counts, so a crash mid-commit still leaves an uncommitted directory."""
    dest = f"{ctx.root}/t/checkpoint_000001"
    src = _src(tmp_path)
    with open(os.path.join(src, MANIFEST_NAME), "w") as f:
        json.dump({"files": [], "metadata": {}}, f)  # never uploaded: it is the old commit mark
    commit_checkpoint(ctx, dest, src, {"iteration": 2})
    assert MANIFEST_NAME not in _files(ctx, dest)
    ctx.fs.rm_file(manifest_path(dest))  # as if the process died before writing it
    assert not is_committed(ctx, dest)
    assert [(i.index, i.committed) for i in list_checkpoints(ctx, f"{ctx.root}/t")] == [(1, False)]


def test_a_checkpoint_whose_directory_was_deleted_by_hand_no_longer_counts(ctx, tmp_path) -> None:
    """Its manifest stays beside (a user removed only the directory): the files it lists are gone, so
    the checkpoint is not committed, the one before it is the latest, and cleanup removes the manifest.
    An empty checkpoint (no files: no directory on S3) still counts."""
    trial = f"{ctx.root}/t"
    commit_checkpoint(ctx, f"{trial}/checkpoint_000000", _src(tmp_path), {"iteration": 1})
    commit_checkpoint(ctx, f"{trial}/checkpoint_000001", _src(tmp_path, "src1"), {"iteration": 2})
    empty = tmp_path / "empty"
    empty.mkdir()
    commit_checkpoint(ctx, f"{trial}/checkpoint_000002", str(empty), {"iteration": 3})
    ctx.fs.rm(f"{trial}/checkpoint_000001", recursive=True)
    ctx.fs.invalidate_cache()
    assert ctx.fs.isfile(manifest_path(f"{trial}/checkpoint_000001"))
    assert [(i.index, i.committed) for i in list_checkpoints(ctx, trial)] == [(0, True), (1, False), (2, True)]
    assert not is_committed(ctx, f"{trial}/checkpoint_000001")
    assert is_committed(ctx, f"{trial}/checkpoint_000002")
    assert cleanup_uncommitted(ctx, trial) == [f"{trial}/checkpoint_000001"]
    ctx.fs.invalidate_cache()
    assert not ctx.fs.exists(manifest_path(f"{trial}/checkpoint_000001"))
    assert [i.index for i in list_checkpoints(ctx, trial)] == [0, 2]


def test_a_checkpoint_saved_with_its_manifest_inside_still_counts(ctx, tmp_path) -> None:
    """The layout of checkpoints committed before the manifest moved beside the directory
    (``tests/data/golden`` holds whole experiments of it): committed, listed, downloaded, its
    metadata rewritten in place, and deleted manifest first."""
    dest = f"{ctx.root}/t/checkpoint_000002"
    commit_checkpoint(ctx, dest, _src(tmp_path), {"iteration": 3})
    manifest = read_manifest(ctx, dest)
    ctx.fs.rm_file(manifest_path(dest))
    ctx.fs.pipe_file(f"{dest}/{MANIFEST_NAME}", json.dumps(manifest).encode())  # the old place
    assert is_committed(ctx, dest)
    assert [(i.index, i.committed, i.metadata) for i in list_checkpoints(ctx, f"{ctx.root}/t")] == [
        (2, True, {"iteration": 3})]
    assert download_checkpoint(ctx, dest, str(tmp_path / "dl")) == {"iteration": 3}
    assert sorted(os.listdir(tmp_path / "dl")) == ["model.txt", "sub"]
    write_user_metadata(ctx, dest, {"k": 2})
    assert read_user_metadata(ctx, dest) == {"k": 2} and not ctx.fs.exists(manifest_path(dest))
    assert ".metadata.json" in [e["path"] for e in read_manifest(ctx, dest)["files"]]
    delete_checkpoint(ctx, dest)
    assert not is_committed(ctx, dest) and _files(ctx, dest) == []
