"""``Checkpoint``: a directory of files, local or on any fsspec storage.

A checkpoint reported by a trainable is a local directory (or a dict, written to
one) until the trial actor commits it to storage; from then on it names the
committed directory by URL and downloads lazily when read.
"""

from __future__ import annotations

import contextlib
import logging
import os
import pickle
import shutil
import tempfile
import weakref
from collections.abc import Iterator
from typing import Any

_DICT_FILE = "dict_checkpoint.pkl"
log = logging.getLogger("audition")


class Checkpoint:
    """A saved training state (Ray Tune's ``Checkpoint``)."""

    def __init__(self, path: str, storage_options: dict[str, Any] | None = None) -> None:
        self.path = path
        self.storage_options = dict(storage_options or {})
        self._dict: dict[str, Any] | None = None
        self._owned_tmp: weakref.finalize[Any, Any] | None = None

    # -- constructors -------------------------------------------------------------
    @classmethod
    def from_directory(cls, path: str | os.PathLike[str]) -> Checkpoint:
        p = os.path.abspath(os.fspath(path))
        if not os.path.isdir(p):
            raise ValueError(f"Checkpoint.from_directory({p!r}): no such directory; save your files there first")
        return cls(p)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Checkpoint:
        if not isinstance(data, dict):
            raise TypeError(f"Checkpoint.from_dict expects a dict, got {type(data).__name__}")
        from actors._tempdirs import owned_tempdir

        tmp = owned_tempdir("ckpt")  # (named for the sweep, should this process be killed before it goes)
        try:
            with open(os.path.join(tmp, _DICT_FILE), "wb") as f:
                pickle.dump(data, f, protocol=pickle.HIGHEST_PROTOCOL)
        except Exception as exc:
            shutil.rmtree(tmp, ignore_errors=True)
            raise TypeError(f"Checkpoint.from_dict: the dict cannot be pickled ({exc}); store plain data") from exc
        ckpt = cls(tmp)
        ckpt._dict = dict(data)
        # removed once committed (_release), or when the object is gone or the process exits: a
        # report() cut short by a stop, a failed commit or a checkpoint never reported leaves no temp dir
        ckpt._owned_tmp = weakref.finalize(ckpt, shutil.rmtree, tmp, True)
        return ckpt

    # -- readers --------------------------------------------------------------------
    @property
    def is_local(self) -> bool:
        return "://" not in self.path or self.path.startswith("file://")

    def to_directory(self, path: str | os.PathLike[str] | None = None) -> str:
        """Copy the checkpoint's files into ``path`` (a new temp dir if None) and return it."""
        dest = os.fspath(path) if path is not None else tempfile.mkdtemp(prefix="audition_ckpt_")
        os.makedirs(dest, exist_ok=True)
        if self.is_local:
            src = self.path[len("file://"):] if self.path.startswith("file://") else self.path
            if os.path.abspath(src) != os.path.abspath(dest):
                shutil.copytree(src, dest, dirs_exist_ok=True)
            return dest
        from storage import StorageContext, download_checkpoint

        ctx = StorageContext(self.path, self.storage_options)
        download_checkpoint(ctx, ctx.root, dest)
        return dest

    @contextlib.contextmanager
    def as_directory(self) -> Iterator[str]:
        """A local directory with the checkpoint's files, valid inside the ``with`` block."""
        if self.is_local:
            yield self.path[len("file://"):] if self.path.startswith("file://") else self.path
            return
        from actors._tempdirs import owned_tempdir

        tmp = self.to_directory(owned_tempdir("ckpt"))  # (swept, should this process be killed inside)
        try:
            yield tmp
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    def to_dict(self) -> dict[str, Any]:
        """The dict given to :meth:`from_dict` (read back from storage if needed)."""
        if self._dict is not None:
            return dict(self._dict)
        with self.as_directory() as d:
            fname = os.path.join(d, _DICT_FILE)
            if not os.path.exists(fname):
                raise ValueError(
                    f"checkpoint {self.path} was not made by Checkpoint.from_dict; use to_directory() to read it"
                )
            with open(fname, "rb") as f:
                self._dict = pickle.load(f)
        assert self._dict is not None
        return dict(self._dict)

    # -- user metadata (Ray Train's, in a file inside the checkpoint directory) -------------
    def get_metadata(self) -> dict[str, Any]:
        """The metadata stored with the checkpoint (``{}`` if none), read anew on every call."""
        from storage import StorageContext, read_user_metadata

        ctx = StorageContext(self.path, self.storage_options)
        return read_user_metadata(ctx, ctx.root)

    def set_metadata(self, metadata: dict[str, Any]) -> None:
        """Replace the stored metadata (a JSON-serializable dict). Set before ``report()`` it travels
        with the checkpoint; on a reported one (``Result.checkpoint``) it is written to storage."""
        from storage import StorageContext, write_user_metadata

        ctx = StorageContext(self.path, self.storage_options)
        write_user_metadata(ctx, ctx.root, metadata)

    def update_metadata(self, metadata: dict[str, Any]) -> None:
        """Merge ``metadata`` into the stored metadata (``dict.update``) and store the result."""
        current = self.get_metadata()
        current.update(metadata)
        self.set_metadata(current)

    def _check_reportable(self) -> None:
        """A local checkpoint must still exist when reported: the user's error, not storage's."""
        if self.is_local:
            local = self.path[len("file://"):] if self.path.startswith("file://") else self.path
            if not os.path.isdir(local):
                raise FileNotFoundError(
                    f"report(checkpoint=...): the checkpoint directory {local} no longer exists; keep it "
                    "until report() returns (it copies the files to storage), then delete it")

    def _release(self) -> None:
        """Remove the temp dir made by from_dict once the files were committed."""
        if self._owned_tmp is not None:
            self._owned_tmp()
            self._owned_tmp = None

    def __getstate__(self) -> dict[str, Any]:
        return {"path": self.path, "storage_options": self.storage_options}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.path = state["path"]
        self.storage_options = state["storage_options"]
        self._dict = None
        self._owned_tmp = None

    def __repr__(self) -> str:
        """Ray 2.60's: ``Checkpoint(filesystem=local, path=/abs/dir)`` (a URL's scheme as the filesystem)."""
        return f"Checkpoint(filesystem={filesystem_name(self.path)}, path={self.path.partition('://')[2] or self.path})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Checkpoint) and other.path == self.path

    def __hash__(self) -> int:
        return hash(self.path)


def committed_at(trial_url: str, options: dict[str, Any], iteration: int) -> str | None:
    """The URL of the trial's newest committed checkpoint saved at ``iteration``, or None (none is,
    or storage cannot be read from here: callers only use it to describe a trial)."""
    from storage import StorageContext, StorageError, list_checkpoints

    try:
        ctx = StorageContext(trial_url, options)
        found = [info for info in list_checkpoints(ctx, ctx.root)
                 if info.committed and info.metadata.get("iteration") == iteration]
    except (StorageError, OSError, ValueError) as exc:
        log.warning("cannot read the checkpoints of %s (%s); its trial object carries none", trial_url, exc)
        return None
    return ctx.uri(found[-1].path) if found else None


__all__ = ["Checkpoint", "committed_at"]


def filesystem_name(url: str) -> str:
    """What Ray's reprs call the filesystem of ``url``: ``local``, or the scheme (``s3``)."""
    scheme, sep, _ = url.partition("://")
    return scheme if sep and scheme != "file" else "local"
