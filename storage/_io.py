"""Whole-object reads and writes, listings and deletes that behave the same on every fsspec backend.

Rules kept here so no caller has to remember them:
- whole-object writes are atomic: object stores replace a key atomically; on local disk we write a
  temporary sibling and ``os.replace`` it, so a crash never leaves half a JSON file;
- no call that expands globs is used, so paths may contain ``[ ] * ?``;
- listings drop fsspec's directory cache first, because other processes write here too.
"""

from __future__ import annotations

import json
import logging
import math
import os
import posixpath
import secrets
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from storage._context import StorageContext
from storage._errors import StorageError
from storage._retry import retrying

T = TypeVar("T")
R = TypeVar("R")
_log = logging.getLogger("storage")
_MISSING: Any = object()
MAX_PARALLEL = 8
# Uploads to a stalled peer block forever: botocore's read_timeout only covers waiting for the
# answer, not sending the body. So every upload gets an overall deadline: twice the read timeout
# (botocore's default 60 s unless set in config_kwargs) plus the time the body takes at 1 MiB/s.
MIN_UPLOAD_RATE = 2**20
DEFAULT_READ_TIMEOUT = 60.0


def json_default(value: Any) -> Any:
    """Make numpy scalars/arrays, sets and other odd values storable instead of failing a report."""
    if hasattr(value, "item") and callable(value.item):
        try:
            return value.item()
        except Exception:  # (not one element: a torch tensor raises RuntimeError)
            pass
    if hasattr(value, "tolist") and callable(value.tolist):
        try:
            return value.tolist()
        except Exception:  # a user's object whose tolist fails: written as its str, never failing the write
            pass
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    return str(value)


def dumps(obj: Any, *, indent: int | None = None) -> str:
    return json.dumps(obj, indent=indent, default=json_default, sort_keys=False)


def key_sorted(obj: Any) -> Any:
    """``obj`` with every dict's keys sorted, as ``json.dump(..., sort_keys=True)`` writes Ray 2.60's
    ``params.json``; a dict whose keys do not compare (``1`` and ``"a"``) keeps its order."""
    if isinstance(obj, dict):
        try:
            keys = sorted(obj)
        except TypeError:
            keys = list(obj)
        return {k: key_sorted(obj[k]) for k in keys}
    if isinstance(obj, (list, tuple)):
        return [key_sorted(v) for v in obj]
    return obj


def result_default(value: Any) -> Any:
    """``json_default`` for a ``result.json`` row: a set is written as its ``str`` (``"{1, 2}"``),
    as Ray 2.60's ``SafeFallbackEncoder`` writes it, so histories and dataframes read the same."""
    if isinstance(value, (set, frozenset)):
        return str(value)
    return json_default(value)


def dumps_result(row: Any, *, indent: int | None = None) -> str:
    """One ``result.json`` line (no newline); with ``indent``, ``params.json`` (Ray's JSON logger writes
    both with the same encoder)."""
    return json.dumps(row, default=result_default, sort_keys=False, indent=indent)


def parallel_map(fn: Callable[[T], R], items: Iterable[T], max_workers: int = MAX_PARALLEL) -> list[R]:
    """Run ``fn`` over ``items`` with a few threads (object stores are latency-bound)."""
    todo = list(items)
    if len(todo) <= 1:
        return [fn(item) for item in todo]
    with ThreadPoolExecutor(max_workers=min(max_workers, len(todo)), thread_name_prefix="storage") as pool:
        return list(pool.map(fn, todo))


def upload_kwargs(ctx: StorageContext, nbytes: int) -> dict[str, Any]:
    """``timeout=`` for fsspec's async backends (it cancels the request); {} where not supported."""
    if not getattr(ctx.fs, "async_impl", False):
        return {}
    config = ctx.options.get("config_kwargs") or {}
    stall = float(config.get("read_timeout") or DEFAULT_READ_TIMEOUT)
    return {"timeout": 2 * stall + nbytes / MIN_UPLOAD_RATE}


def write_bytes(ctx: StorageContext, path: str, data: bytes, *, what: str = "writing") -> None:
    """Replace the object at ``path`` with ``data`` as one atomic step."""
    url = ctx.uri(path)
    if ctx.is_local:
        def local_write() -> None:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            tmp = f"{path}.tmp-{secrets.token_hex(4)}"
            try:
                with open(tmp, "wb") as handle:
                    handle.write(data)
                os.replace(tmp, path)
            except BaseException:
                if os.path.exists(tmp):
                    os.unlink(tmp)
                raise
        retrying(local_write, what=what, url=url)
        return
    fs = ctx.fs
    kwargs = upload_kwargs(ctx, len(data))
    retrying(lambda: fs.pipe_file(path, data, **kwargs), what=what, url=url)


def read_bytes(ctx: StorageContext, path: str, *, what: str = "reading") -> bytes:
    """Whole object; ``FileNotFoundError`` when absent (callers decide whether that is fine)."""
    fs = ctx.fs
    return bytes(retrying(lambda: fs.cat_file(path), what=what, url=ctx.uri(path)))


def upload_file(ctx: StorageContext, local: str, path: str, *, what: str = "uploading") -> None:
    """Copy the local file ``local`` to ``path``, streamed (never whole in memory); atomic on local disk."""
    url = ctx.uri(path)
    fs = ctx.fs
    if ctx.has_directories:
        retrying(lambda: fs.makedirs(posixpath.dirname(path), exist_ok=True), what=what, url=url)
    kwargs = upload_kwargs(ctx, os.path.getsize(local))
    if not ctx.is_local:
        retrying(lambda: fs.put_file(local, path, **kwargs), what=what, url=url)
        return
    tmp = f"{path}.tmp-{secrets.token_hex(4)}"
    try:
        retrying(lambda: fs.put_file(local, tmp), what=what, url=url)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def download_file(ctx: StorageContext, path: str, local: str, *, what: str = "downloading") -> None:
    """Copy the object at ``path`` to the local file ``local`` (streamed); ``FileNotFoundError`` if absent."""
    fs = ctx.fs
    retrying(lambda: fs.get_file(path, local), what=what, url=ctx.uri(path))


def exists(ctx: StorageContext, path: str) -> bool:
    """True if a file or directory is at ``path`` (fresh answer: caches are dropped first)."""
    fs = ctx.fs
    fs.invalidate_cache(path)
    return bool(retrying(lambda: fs.exists(path), what="checking", url=ctx.uri(path)))


def write_json(ctx: StorageContext, path: str, obj: Any) -> None:
    """Write ``obj`` as one JSON document, replacing the file atomically."""
    write_bytes(ctx, path, dumps(obj, indent=2).encode("utf-8"), what="writing JSON")


def read_json(ctx: StorageContext, path: str, default: Any = _MISSING) -> Any:
    """Parse a JSON file; return ``default`` if it is missing (StorageError if no default given)."""
    try:
        data = read_bytes(ctx, path, what="reading JSON")
    except FileNotFoundError as exc:
        if default is not _MISSING:
            return default
        raise StorageError(f"{ctx.uri(path)} does not exist: check the path or the experiment name",
                           url=ctx.uri(path)) from exc
    try:
        return json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise StorageError(f"{ctx.uri(path)} is not valid JSON ({exc}): the file is corrupted; "
                           "restore it from a backup or delete it", url=ctx.uri(path)) from exc


def write_text(ctx: StorageContext, path: str, text: str) -> None:
    """Write a text file (error.txt and friends), replacing it atomically."""
    write_bytes(ctx, path, text.encode("utf-8"), what="writing text")


def remove_file(ctx: StorageContext, path: str, *, attempts: int = 5) -> None:
    """Delete one object; absent is fine."""
    fs = ctx.fs

    def rm() -> None:
        try:
            fs.rm_file(path)
        except FileNotFoundError:
            pass

    retrying(rm, what="deleting", url=ctx.uri(path), attempts=attempts)


def _children(ctx: StorageContext, path: str, detail: bool) -> list[Any]:
    """``fs.ls`` of ``path`` (info dicts, or names only), fresh; [] if it does not exist."""
    fs = ctx.fs
    fs.invalidate_cache(path)

    def ls() -> list[Any]:
        try:
            return list(fs.ls(path, detail=detail))
        except (FileNotFoundError, NotADirectoryError):
            return []

    return retrying(ls, what="listing", url=ctx.uri(path))


def list_dir(ctx: StorageContext, path: str) -> list[dict[str, Any]]:
    """Immediate children as fsspec info dicts; [] if ``path`` does not exist."""
    base = path.rstrip("/")
    return [e for e in _children(ctx, path, True) if e["name"].rstrip("/") != base]


def list_names(ctx: StorageContext, path: str) -> list[str]:
    """Immediate children's paths, as ``list_dir`` gives their ``name``s, without asking the store for
    anything else (``fs.ls(detail=False)``); [] if ``path`` does not exist."""
    base = path.rstrip("/")
    return [n for n in _children(ctx, path, False) if n.rstrip("/") != base]


def find_files(ctx: StorageContext, path: str) -> dict[str, int]:
    """Every file below ``path`` (recursive) mapped to its size; {} if ``path`` does not exist."""
    fs = ctx.fs
    fs.invalidate_cache(path)

    def find() -> dict[str, Any]:
        try:
            return dict(fs.find(path, detail=True, withdirs=False))
        except FileNotFoundError:
            return {}

    found = retrying(find, what="listing", url=ctx.uri(path))
    return {
        name: int(info.get("size") or 0) for name, info in found.items() if info.get("type") != "directory"
    }


def remove_tree(ctx: StorageContext, path: str, *, attempts: int = 5) -> None:
    """Delete every file below ``path`` one by one (no globbing), then empty directories."""
    files = sorted(find_files(ctx, path))
    parallel_map(lambda name: remove_file(ctx, name, attempts=attempts), files)
    remove_empty_dirs(ctx, path)


def remove_empty_dirs(ctx: StorageContext, path: str) -> None:
    """Where directories are real (local, memory), remove the now-empty ones bottom-up."""
    if not ctx.has_directories:
        return
    fs = ctx.fs
    fs.invalidate_cache(path)
    try:
        found = fs.find(path, withdirs=True, detail=True)
    except FileNotFoundError:
        return
    dirs = [name for name, info in found.items() if info.get("type") == "directory"]
    if fs.isdir(path):
        dirs.append(path)
    for name in sorted(set(dirs), key=lambda d: d.count("/"), reverse=True):
        try:
            fs.rmdir(name)
        except (FileNotFoundError, OSError) as exc:
            _log.debug("not removing directory %s: %s", ctx.uri(name), exc)


def is_finite_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def basename(path: str) -> str:
    return posixpath.basename(path.rstrip("/"))
