"""A checkpoint's user metadata: the JSON file Ray Train keeps inside the checkpoint directory.

It is an ordinary file of the checkpoint (uploaded with the others when the checkpoint is
committed), except that it may be rewritten after the commit (``Checkpoint.set_metadata`` on a
``Result.checkpoint``). So the manifest lists it without vouching for its size, and a rewrite of a
committed checkpoint that did not have one adds it to the manifest, so downloads carry it.
"""

from __future__ import annotations

import json
import posixpath
from typing import Any

from storage._context import StorageContext
from storage._errors import StorageError
from storage._io import read_bytes, write_bytes
from storage._layout import USER_METADATA_NAME


def encode_user_metadata(metadata: dict[str, Any]) -> bytes:
    """The file's bytes; ``TypeError`` (before anything is written) for a value JSON cannot hold."""
    if not isinstance(metadata, dict):
        raise TypeError(f"checkpoint metadata must be a dict, got {type(metadata).__name__}: "
                        "wrap the value, e.g. {'value': ...}")
    try:
        text = json.dumps(metadata)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"checkpoint metadata is not JSON-serializable ({exc}); store only dicts, lists, "
                        "strings, numbers, booleans and None (e.g. a list instead of a set)") from exc
    return text.encode("utf-8")


def read_user_metadata(ctx: StorageContext, ckpt_dir: str) -> dict[str, Any]:
    """The checkpoint's user metadata; ``{}`` when it has none."""
    path = posixpath.join(ckpt_dir, USER_METADATA_NAME)
    try:
        data = read_bytes(ctx, path, what="reading checkpoint metadata")
    except FileNotFoundError:
        return {}
    try:
        value = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise StorageError(f"the checkpoint metadata {ctx.uri(path)} is not JSON ({exc}): rewrite it with "
                           "Checkpoint.set_metadata({...}) or delete the file", url=ctx.uri(path)) from exc
    if not isinstance(value, dict):
        raise StorageError(f"the checkpoint metadata {ctx.uri(path)} holds a {type(value).__name__}, not an "
                           "object: rewrite it with Checkpoint.set_metadata({...})", url=ctx.uri(path))
    return value


def write_user_metadata(ctx: StorageContext, ckpt_dir: str, metadata: dict[str, Any]) -> None:
    """Replace the checkpoint's user metadata. On a committed checkpoint whose manifest does not list
    the file yet, the manifest is rewritten to list it (after the file is written)."""
    from storage._checkpoint import find_manifest, write_manifest

    data = encode_user_metadata(metadata)
    write_bytes(ctx, posixpath.join(ckpt_dir, USER_METADATA_NAME), data, what="writing checkpoint metadata")
    try:
        where, manifest = find_manifest(ctx, ckpt_dir)
    except StorageError as exc:
        if isinstance(exc.__cause__, FileNotFoundError):
            return  # not committed (a directory being prepared, or the user's own): a commit lists it
        raise
    if not any(entry["path"] == USER_METADATA_NAME for entry in manifest["files"]):
        manifest["files"].append({"path": USER_METADATA_NAME, "size": len(data)})
        write_manifest(ctx, where, manifest)  # where it is: beside, or inside an older checkpoint


__all__ = ["USER_METADATA_NAME", "encode_user_metadata", "read_user_metadata", "write_user_metadata"]
