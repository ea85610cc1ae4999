"""``Checkpoint.get_metadata`` / ``set_metadata`` / ``update_metadata`` as Ray Train 2.60 keeps them.

Expected values recorded from Ray 2.60 (``/work/rayvenv``, ray.train.Checkpoint and a Tuner run of
the same three-report trainable, see /work/shared/notes/ray-fidelity.md): the metadata is the file
``.metadata.json`` inside the checkpoint directory, written as ``json.dumps(metadata)`` (so tuples
read back as lists, int keys as strings, NaN as NaN); a fresh checkpoint reads ``{}``; the file
travels with the reported checkpoint, ``to_directory``/``as_directory`` include it, and a
``Result.checkpoint`` updated later reads back the update after ``Tuner.restore(...).get_results()``.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from typing import Any

import pytest

from actors import Callback, Checkpoint, FailureConfig, RunConfig, Tuner, get_checkpoint, report
from storage import (
    MANIFEST_NAME,
    USER_METADATA_NAME,
    StorageContext,
    commit_checkpoint,
    download_checkpoint,
    read_manifest,
)

# recorded from Ray 2.60: the bytes of .metadata.json after set_metadata(RAY_INPUT)
RAY_INPUT = {"a": 1, "t": (1, 2), 3: "int key", "f": 1.5, "n": None, "nan": float("nan")}
RAY_FILE = '{"a": 1, "t": [1, 2], "3": "int key", "f": 1.5, "n": null, "nan": NaN}'


def _ckpt_dir(tmp_path: Any, name: str = "ck") -> str:
    d = tmp_path / name
    d.mkdir()
    (d / "w.txt").write_text("x")
    return str(d)


def test_metadata_is_rays_file_in_the_checkpoint_directory(tmp_path) -> None:
    d = _ckpt_dir(tmp_path)
    ck = Checkpoint.from_directory(d)
    assert ck.get_metadata() == {}  # recorded: a fresh checkpoint
    assert USER_METADATA_NAME == ".metadata.json" != MANIFEST_NAME
    ck.set_metadata(RAY_INPUT)
    assert sorted(os.listdir(d)) == [".metadata.json", "w.txt"]
    with open(os.path.join(d, ".metadata.json")) as f:
        assert f.read() == RAY_FILE
    got = ck.get_metadata()
    assert math.isnan(got.pop("nan")) and got == {"a": 1, "t": [1, 2], "3": "int key", "f": 1.5, "n": None}
    ck.update_metadata({"a": 2, "b": [1]})  # recorded: dict.update, existing keys keep their place
    assert list(Checkpoint.from_directory(d).get_metadata()) == ["a", "t", "3", "f", "n", "nan", "b"]
    assert Checkpoint.from_directory(d).get_metadata()["a"] == 2
    ck.set_metadata({"a": 1})
    ck.update_metadata([("b", 2)])  # recorded: pairs are accepted, as dict.update takes them
    assert ck.get_metadata() == {"a": 1, "b": 2}
    with pytest.raises(TypeError):  # recorded: Ray's TypeError 'NoneType' object is not iterable
        ck.update_metadata(None)  # type: ignore[arg-type]
    out = ck.to_directory(str(tmp_path / "out"))
    assert sorted(os.listdir(out)) == [".metadata.json", "w.txt"]  # recorded: to_directory copies it
    with ck.as_directory() as seen:
        assert sorted(os.listdir(seen)) == [".metadata.json", "w.txt"]


def test_a_value_json_cannot_hold_is_refused_and_the_old_metadata_stays(tmp_path) -> None:
    """Ray 2.60 raises ``TypeError: Object of type set is not JSON serializable`` but has already
    truncated the file, so its ``get_metadata()`` then raises ``JSONDecodeError`` (recorded). audition
    raises the same ``TypeError`` before writing: the previous metadata stays (documented)."""
    ck = Checkpoint.from_directory(_ckpt_dir(tmp_path))
    ck.set_metadata({"keep": 1})
    for bad in ({"x": {1, 2}}, {"x": object()}):
        with pytest.raises(TypeError, match="not JSON-serializable"):
            ck.set_metadata(bad)
        assert ck.get_metadata() == {"keep": 1}
    # Ray stores any JSON value ([1, 2] reads back as [1, 2]); audition only a dict (documented)
    with pytest.raises(TypeError, match="must be a dict"):
        ck.set_metadata([1, 2])  # type: ignore[arg-type]


# ------------------------------------------------------------------------------ storage (local and S3)
def _storage(request: Any, tmp_path: Any) -> tuple[str, dict[str, Any]]:
    if request.param == "s3":
        return request.getfixturevalue("s3_location")
    return str(tmp_path / "store"), {}


@pytest.fixture(params=["local", "s3"])
def store(request, tmp_path) -> tuple[str, dict[str, Any]]:
    return _storage(request, tmp_path)


def test_metadata_set_after_the_commit_is_downloaded_with_the_checkpoint(store, tmp_path) -> None:
    """A committed checkpoint without metadata gets it listed in its manifest (so a download, which
    fetches what the manifest lists, carries it); one whose metadata grows still downloads."""
    url, options = store
    ctx = StorageContext(url, options)
    src = _ckpt_dir(tmp_path, "plain")
    with_meta = _ckpt_dir(tmp_path, "with")
    Checkpoint.from_directory(with_meta).set_metadata({"i": 1})
    commit_checkpoint(ctx, f"{ctx.root}/t/checkpoint_000000", src, {"iteration": 1})
    commit_checkpoint(ctx, f"{ctx.root}/t/checkpoint_000001", with_meta, {"iteration": 2})
    plain = Checkpoint(ctx.uri(f"{ctx.root}/t/checkpoint_000000"), options)
    listed = Checkpoint(ctx.uri(f"{ctx.root}/t/checkpoint_000001"), options)
    assert plain.get_metadata() == {} and listed.get_metadata() == {"i": 1}
    assert [e["path"] for e in read_manifest(ctx, f"{ctx.root}/t/checkpoint_000001")["files"]] == [
        ".metadata.json", "w.txt"]
    plain.set_metadata({"later": True})
    listed.update_metadata({"much": "longer than before"})
    manifest = read_manifest(ctx, f"{ctx.root}/t/checkpoint_000000")
    assert manifest["metadata"] == {"iteration": 1}  # audition's own metadata is untouched
    for ck, want in ((plain, {"later": True}), (listed, {"i": 1, "much": "longer than before"})):
        out = ck.to_directory(tempfile.mkdtemp(dir=tmp_path))
        assert sorted(os.listdir(out)) == [".metadata.json", "w.txt"]
        with open(os.path.join(out, ".metadata.json")) as f:
            assert json.load(f) == want
        assert ck.get_metadata() == want
    assert download_checkpoint(ctx, f"{ctx.root}/t/checkpoint_000001", str(tmp_path / "dl")) == {"iteration": 2}


# ------------------------------------------------------------------------------------- a whole run
def reports_with_metadata(config: dict[str, Any]) -> None:
    """Three checkpointed reports, metadata on the first and the third (as the Ray recording), then a
    failure; the retry, from the third, reports what its checkpoint's metadata and files are."""
    start = get_checkpoint()
    if start is not None:
        with start.as_directory() as d:
            files = sorted(os.listdir(d))
            report({"score": 9, "resumed_meta": start.get_metadata(), "files": files})
        return
    for i in range(1, 4):
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, "m.txt"), "w") as f:
                f.write(str(i))
            ck = Checkpoint.from_directory(d)
            if i != 2:
                ck.set_metadata({"iter": i, "nested": {"k": [i]}})
            report({"score": i}, checkpoint=ck)
    raise RuntimeError("planned failure: the retry resumes from checkpoint_000002")


class _SeesMetadata(Callback):
    def __init__(self) -> None:
        self.seen: list[tuple[str, dict[str, Any]]] = []

    def on_checkpoint(self, checkpoint: Checkpoint, **info: Any) -> None:
        self.seen.append((os.path.basename(checkpoint.path.rstrip("/")), checkpoint.get_metadata()))


def _run_and_read_back(url: str, options: dict[str, Any], system: str) -> None:
    cb = _SeesMetadata()
    grid = Tuner(reports_with_metadata, run_config=RunConfig(
        name="meta", storage=url, storage_options=options, verbose=0, callbacks=[cb], system=system,
        failure_config=FailureConfig(max_failures=1))).fit()
    r = grid[0]
    assert r.error is None
    assert (r.metrics["resumed_meta"], r.metrics["files"]) == (
        {"iter": 3, "nested": {"k": [3]}}, [".metadata.json", "m.txt"])
    # recorded from Ray 2.60: on_checkpoint, Result.checkpoint and best_checkpoints read these
    assert cb.seen == [("checkpoint_000000", {"iter": 1, "nested": {"k": [1]}}), ("checkpoint_000001", {}),
                       ("checkpoint_000002", {"iter": 3, "nested": {"k": [3]}})]
    assert r.checkpoint is not None and r.checkpoint.get_metadata() == {"iter": 3, "nested": {"k": [3]}}
    assert [c.get_metadata() for c, _ in r.best_checkpoints] == [
        {"iter": 1, "nested": {"k": [1]}}, {}, {"iter": 3, "nested": {"k": [3]}}]
    r.checkpoint.update_metadata({"later": True})
    restored = Tuner.restore(grid.experiment_path, reports_with_metadata, storage_options=options)
    assert restored.get_results()[0].checkpoint.get_metadata() == {  # recorded: the update is kept
        "iter": 3, "nested": {"k": [3]}, "later": True}


def test_metadata_travels_with_reported_checkpoints_across_processes(storage_dir) -> None:
    _run_and_read_back(storage_dir, {}, "multiproc")


def test_metadata_travels_with_reported_checkpoints_on_s3(s3_location) -> None:
    url, options = s3_location
    _run_and_read_back(url, options, "simple")
