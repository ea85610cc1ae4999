"""Checkpoints that are either complete or invisible, on stores without rename.

A checkpoint directory counts only once its manifest exists, and the manifest is written after every
file it lists has been uploaded. Deleting goes the other way round (manifest first). So a crash at
any moment leaves either a committed checkpoint or an uncommitted directory that
``cleanup_uncommitted`` may remove. The manifest sits beside the directory, so the directory holds
only the user's files (as Ray's); one committed by an earlier version, with its manifest inside, is
read the same way.
"""

from __future__ import annotations

import json
import logging
import os
import posixpath
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from storage._context import StorageContext
from storage._errors import StorageError
from storage._io import (
    dumps,
    find_files,
    list_dir,
    list_names,
    parallel_map,
    read_bytes,
    remove_empty_dirs,
    remove_file,
    remove_tree,
    upload_kwargs,
    write_bytes,
)
from storage._layout import (
    MANIFEST_NAME,
    USER_METADATA_NAME,
    ExperimentLayout,
    legacy_manifest_path,
    manifest_dir_name,
    manifest_path,
)
from storage._retry import as_storage_error, retrying

_log = logging.getLogger("storage")
MANIFEST_FORMAT = 1

# Which checkpoint directories may already exist, per (process, storage, trial dir). Committing into
# a directory that may hold an older checkpoint first deletes its manifest; for the usual fresh index
# that request is skipped (it costs as much as the manifest itself on a busy store). A trial dir's
# names only grow, so the answer errs towards the safe side; only the trial's own process creates its
# dirs. The newest KNOWN_DIRS_MAX trial dirs are kept (least recently committed to first out): one
# process commits for many trial dirs over its life (``system="simple"``, thousands of simulations),
# and a trial dir dropped from here is only listed again at its next commit.
KNOWN_DIRS_MAX = 1024
_known_dirs: OrderedDict[tuple[int, str, str], set[str]] = OrderedDict()
_known_lock = threading.Lock()


def _names_known(key: tuple[int, str, str]) -> set[str] | None:
    """The names known under a trial dir (marked most recently used), or None: not known."""
    with _known_lock:
        names = _known_dirs.get(key)
        if names is not None:
            _known_dirs.move_to_end(key)
        return names


def _know(key: tuple[int, str, str], names: set[str]) -> set[str]:
    """Add ``names`` to what is known under a trial dir, dropping the least recently used dirs."""
    with _known_lock:
        known = _known_dirs.get(key)
        if known is None:
            known = _known_dirs[key] = set()
            while len(_known_dirs) > KNOWN_DIRS_MAX:
                _known_dirs.popitem(last=False)
        else:
            _known_dirs.move_to_end(key)
        known.update(names)
        return known


def _may_exist(ctx: StorageContext, dest_dir: str) -> bool:
    parent, name = posixpath.split(dest_dir.rstrip("/"))
    key = (os.getpid(), ctx.url, parent)
    names = _names_known(key)
    if names is None:
        names = _know(key, {posixpath.basename(n.rstrip("/")) for n in list_names(ctx, parent)})
    with _known_lock:
        return name in names or f".{name}{MANIFEST_NAME}" in names  # an empty one on S3 has no dir


def _remember(ctx: StorageContext, dest_dir: str) -> None:
    """``dest_dir`` exists now. Only a trial dir already listed is noted (one dropped meanwhile is
    listed again at its next commit, which then sees this one)."""
    parent, name = posixpath.split(dest_dir.rstrip("/"))
    with _known_lock:
        known = _known_dirs.get((os.getpid(), ctx.url, parent))
        if known is not None:
            known.add(name)


@dataclass(frozen=True)
class CheckpointInfo:
    """One ``checkpoint_NNNNNN`` directory of a trial; ``metadata`` is {} unless committed."""

    index: int
    path: str
    committed: bool
    metadata: dict[str, Any] = field(default_factory=dict)


def _local_files(local_dir: str) -> list[tuple[str, str, int]]:
    """(relative posix path, absolute path, size) of every file below ``local_dir``."""
    out: list[tuple[str, str, int]] = []
    for dirpath, dirnames, filenames in os.walk(local_dir):
        dirnames.sort()
        for name in sorted(filenames):
            full = os.path.join(dirpath, name)
            rel = os.path.relpath(full, local_dir).replace(os.sep, "/")
            if rel == MANIFEST_NAME:  # an earlier version's commit mark: never uploaded as a user file
                continue
            out.append((rel, full, os.path.getsize(full)))
    return out


def _safe_relpath(rel: Any, url: str) -> str:
    """Manifest paths come from storage: refuse ones that would write outside the target dir."""
    if not isinstance(rel, str) or not rel or rel.startswith("/") or "\\" in rel:
        raise StorageError(f"checkpoint manifest at {url} lists a bad file path {rel!r}: the manifest "
                           "is corrupted; delete this checkpoint", url=url)
    if any(part in ("", ".", "..") for part in rel.split("/")):
        raise StorageError(f"checkpoint manifest at {url} lists a bad file path {rel!r}: the manifest "
                           "is corrupted; delete this checkpoint", url=url)
    return rel


def write_manifest(ctx: StorageContext, path: str, manifest: dict[str, Any]) -> None:
    """Write a checkpoint's manifest (the last write of a commit: what makes it count)."""
    write_bytes(ctx, path, dumps(manifest, indent=2).encode("utf-8"), what="writing checkpoint manifest")


def commit_checkpoint(
    ctx: StorageContext,
    dest_dir: str,
    local_dir: str,
    metadata: dict[str, Any],
    *,
    clock: Callable[[], float] = time.time,
    put_manifest: Callable[[StorageContext, str, dict[str, Any]], None] = write_manifest,
) -> dict[str, Any]:
    """Upload every file of ``local_dir`` into ``dest_dir``, then the manifest; return the manifest.

    Transient errors are retried per file. On a permanent error whatever was uploaded is removed
    (manifest first, best effort) and a StorageError is raised: a half checkpoint never counts.
    Committing over an existing checkpoint first un-commits it (its manifest is deleted).
    ``put_manifest`` writes the manifest (the simulator's stores it to be encoded when first read).
    """
    url = ctx.uri(dest_dir)
    if not os.path.isdir(local_dir):
        raise StorageError(f"cannot commit checkpoint to {url}: local directory {local_dir} does not "
                           "exist or is not a directory; save the checkpoint files there first", url=url)
    if not isinstance(metadata, dict):
        raise StorageError(f"checkpoint metadata for {url} must be a dict, got {type(metadata).__name__}",
                           url=url)
    try:
        json.dumps(metadata)
    except (TypeError, ValueError) as exc:
        raise StorageError(f"checkpoint metadata for {url} is not JSON-serializable ({exc}): pass only "
                           "dicts, lists, strings, numbers, booleans and None", url=url) from exc
    files = _local_files(local_dir)
    manifest = {
        "format": MANIFEST_FORMAT,
        "files": [{"path": rel, "size": size} for rel, _, size in files],
        "metadata": metadata,
        "committed_at": clock(),
    }
    manifest_file = manifest_path(dest_dir)
    fs = ctx.fs
    uploaded: list[str] = []

    def upload(item: tuple[str, str, int]) -> None:
        rel, full, size = item
        target = posixpath.join(dest_dir, rel)
        if ctx.has_directories:
            fs.makedirs(posixpath.dirname(target), exist_ok=True)
        uploaded.append(target)
        kwargs = upload_kwargs(ctx, size)
        retrying(lambda: fs.put_file(full, target, **kwargs), what="uploading checkpoint file",
                 url=ctx.uri(target))

    try:
        if _may_exist(ctx, dest_dir):  # un-commit whatever was there before touching its files
            remove_file(ctx, manifest_file)
            remove_file(ctx, legacy_manifest_path(dest_dir))
        _remember(ctx, dest_dir)
        if ctx.has_directories:
            retrying(lambda: fs.makedirs(dest_dir, exist_ok=True), what="creating checkpoint dir", url=url)
        parallel_map(upload, files)
        put_manifest(ctx, manifest_file, manifest)
    except Exception as exc:
        _discard(ctx, dest_dir, manifest_file, uploaded)
        if isinstance(exc, StorageError):
            raise
        raise as_storage_error(exc, what="committing checkpoint", url=url) from exc
    return manifest


def _discard(ctx: StorageContext, dest_dir: str, manifest_file: str, uploaded: list[str]) -> None:
    """Best-effort, single-attempt cleanup after a failed commit; leftovers stay uncommitted."""
    for path in [manifest_file, *uploaded]:
        try:
            remove_file(ctx, path, attempts=1)
        except Exception as exc:  # the store is failing: cleanup_uncommitted will finish later
            _log.warning("could not remove %s after a failed checkpoint commit: %s", ctx.uri(path), exc)
            if path == manifest_file:
                return
    try:
        remove_empty_dirs(ctx, dest_dir)
    except Exception as exc:
        _log.debug("could not remove empty dirs under %s: %s", ctx.uri(dest_dir), exc)


def is_committed(ctx: StorageContext, ckpt_dir: str) -> bool:
    """True once the manifest exists (beside the directory, or inside for an earlier version's)."""
    fs = ctx.fs
    fs.invalidate_cache(posixpath.dirname(ckpt_dir.rstrip("/")))
    fs.invalidate_cache(ckpt_dir)

    def exists(path: str) -> bool:
        return bool(retrying(lambda: fs.isfile(path), what="checking checkpoint", url=ctx.uri(path)))

    if exists(manifest_path(ckpt_dir)):  # (its directory deleted by hand: not a checkpoint any more)
        return bool(find_files(ctx, ckpt_dir)) or not read_manifest(ctx, ckpt_dir)["files"]
    return exists(legacy_manifest_path(ckpt_dir))


def read_manifest(ctx: StorageContext, ckpt_dir: str) -> dict[str, Any]:
    """The checkpoint's manifest; StorageError if it is missing or unreadable."""
    return find_manifest(ctx, ckpt_dir)[1]


def find_manifest(ctx: StorageContext, ckpt_dir: str, *, beside: bool = True) -> tuple[str, dict[str, Any]]:
    """(path, content) of the checkpoint's manifest: beside the directory, else inside it (an earlier
    version's); ``beside=False`` when a listing showed none beside. StorageError if there is none."""
    url = ctx.uri(ckpt_dir)
    data: bytes | None = None
    missing: FileNotFoundError | None = None
    for path in (manifest_path(ckpt_dir), legacy_manifest_path(ckpt_dir))[0 if beside else 1:]:
        try:
            data = read_bytes(ctx, path, what="reading checkpoint manifest")
            break
        except FileNotFoundError as exc:
            missing = exc
    if data is None:
        raise StorageError(f"{url} is not a committed checkpoint (no {posixpath.basename(manifest_path(ckpt_dir))} "
                           "beside it): it is incomplete or was deleted; use the latest committed checkpoint "
                           "instead", url=url) from missing
    try:
        manifest = json.loads(data.decode("utf-8"))
        if not isinstance(manifest, dict) or not isinstance(manifest.get("files"), list):
            raise ValueError("not a manifest object")
        for entry in manifest["files"]:
            _safe_relpath(entry["path"], url)
            int(entry["size"])
        if not isinstance(manifest.get("metadata", {}), dict):
            raise ValueError("metadata is not an object")
    except StorageError:
        raise
    except (UnicodeDecodeError, ValueError, KeyError, TypeError) as exc:
        raise StorageError(f"checkpoint manifest at {url} is corrupted ({exc}): delete this checkpoint "
                           "and use an older one", url=url) from exc
    return path, manifest


def download_checkpoint(ctx: StorageContext, ckpt_dir: str, local_dir: str) -> dict[str, Any]:
    """Fetch a committed checkpoint into ``local_dir``, checking every listed file and size."""
    url = ctx.uri(ckpt_dir)
    manifest = read_manifest(ctx, ckpt_dir)
    fs = ctx.fs
    os.makedirs(local_dir, exist_ok=True)

    def fetch(entry: dict[str, Any]) -> None:
        rel = _safe_relpath(entry["path"], url)
        source = posixpath.join(ckpt_dir, rel)
        target = os.path.join(local_dir, *rel.split("/"))
        os.makedirs(os.path.dirname(target), exist_ok=True)
        try:
            retrying(lambda: fs.get_file(source, target), what="downloading checkpoint file",
                     url=ctx.uri(source))
        except FileNotFoundError as exc:
            raise StorageError(f"checkpoint {url} is damaged: {rel} is listed in its manifest but missing; "
                               "use an older checkpoint", url=url) from exc
        size = os.path.getsize(target)
        # the user metadata may be rewritten after the commit (Checkpoint.set_metadata): no fixed size
        if size != int(entry["size"]) and rel != USER_METADATA_NAME:
            raise StorageError(f"checkpoint {url} is damaged: {rel} has {size} bytes, the manifest says "
                               f"{entry['size']}; use an older checkpoint", url=url)

    parallel_map(fetch, manifest["files"])
    return dict(manifest.get("metadata") or {})


def _scan(ctx: StorageContext, trial_dir: str, after_index: int) -> list[tuple[int, str, bool, bool]]:
    """(index, directory path, manifest listed beside it, directory listed) of the trial's checkpoints
    numbered above ``after_index``, from one listing: a directory, or a manifest alone (an empty
    checkpoint on S3, or one whose directory was deleted by hand)."""
    found: dict[int, tuple[str, bool, bool]] = {}
    for entry in list_dir(ctx, trial_dir):
        name = entry["name"].rstrip("/")
        dir_name = manifest_dir_name(name)
        if dir_name is not None:
            path = posixpath.join(posixpath.dirname(name), dir_name)
        elif entry.get("type") == "directory":
            path = name
        else:
            continue
        index = ExperimentLayout.parse_checkpoint_index(path)
        if index is not None and index > after_index:
            _, beside, listed = found.get(index, ("", False, False))
            found[index] = (path, beside or dir_name is not None, listed or dir_name is None)
    return [(index, path, beside, listed) for index, (path, beside, listed) in sorted(found.items())]


def _inspect(ctx: StorageContext, item: tuple[int, str, bool, bool]) -> CheckpointInfo:
    """The checkpoint as committed or not; a manifest not listed beside it may be inside (older)."""
    index, path, beside, listed = item
    try:
        _, manifest = find_manifest(ctx, path, beside=beside)
    except StorageError as exc:
        if not isinstance(exc.__cause__, FileNotFoundError):
            _log.warning("ignoring checkpoint: %s", exc)
        return CheckpointInfo(index, path, False)
    if not listed and manifest["files"]:  # its files are gone (the directory deleted by hand)
        _log.warning("ignoring checkpoint %s: its directory is gone", ctx.uri(path))
        return CheckpointInfo(index, path, False)
    return CheckpointInfo(index, path, True, dict(manifest.get("metadata") or {}))


def list_checkpoints(ctx: StorageContext, trial_dir: str) -> list[CheckpointInfo]:
    """All checkpoint directories of a trial, committed or not, sorted by index."""
    return parallel_map(lambda item: _inspect(ctx, item), _scan(ctx, trial_dir, -1))


def committed_after(ctx: StorageContext, trial_dir: str, after_index: int) -> list[CheckpointInfo]:
    """The trial's committed checkpoints numbered above ``after_index``, oldest first.

    Only their manifests are read, so asking "anything newer than what I know?" costs one listing
    when the answer is no. A directory without a manifest (an upload cut short) is left out.
    """
    infos = parallel_map(lambda item: _inspect(ctx, item), _scan(ctx, trial_dir, after_index))
    return [info for info in infos if info.committed]


def latest_committed_checkpoint(ctx: StorageContext, trial_dir: str) -> CheckpointInfo | None:
    committed = [info for info in list_checkpoints(ctx, trial_dir) if info.committed]
    return committed[-1] if committed else None


def delete_checkpoint(ctx: StorageContext, ckpt_dir: str) -> None:
    """Manifest first, then the files: a half-deleted checkpoint is never taken as committed."""
    remove_file(ctx, manifest_path(ckpt_dir))
    files = sorted(find_files(ctx, ckpt_dir))
    legacy = legacy_manifest_path(ckpt_dir)
    if legacy in files:  # an earlier version's manifest, inside: it too goes before the files
        remove_file(ctx, legacy)
        files.remove(legacy)
    parallel_map(lambda name: remove_file(ctx, name), files)
    remove_empty_dirs(ctx, ckpt_dir)


def cleanup_uncommitted(ctx: StorageContext, trial_dir: str) -> list[str]:
    """Delete the trial's checkpoint directories that have no manifest; return their paths.

    Call only while nothing is committing into this trial (e.g. before restoring it): a commit in
    progress looks exactly like an abandoned one.
    """
    removed: list[str] = []
    for info in list_checkpoints(ctx, trial_dir):
        if not info.committed:
            remove_file(ctx, manifest_path(info.path))  # one whose directory is gone leaves its manifest
            remove_tree(ctx, info.path)
            removed.append(info.path)
    return removed
