"""A searcher's state when the searcher was written for Ray Tune: ``save(checkpoint_path)`` writes a file.

Ray Tune's ``Searcher`` saves and restores through files: Tune calls ``save(path)`` on a file of its
choosing and later ``restore(path)`` on it, and its guide shows custom searchers that pickle
themselves that way. audition's plugins return their state from ``save()`` instead. The engine and
the wrappers reach any searcher through :func:`state_of` and :func:`load_state`, so one written
either way runs: a file-writing searcher's state is the bytes of its file (held as ``{"kind": <class
name>, RAY_FILE: bytes}``), written back to a file for its ``restore(path)``. The files are the
port :class:`SearcherFiles`'s (``actors._searcher_files``, loaded when first asked for): this package
does no I/O.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any, Protocol

#: the key of a file-writing searcher's saved state that holds its file's bytes
RAY_FILE = "ray_file"
#: Ray's name for a searcher's file in a directory (``Searcher.CKPT_FILE_TMPL``)
CKPT_FILE_TMPL = "searcher-state-{}.pkl"


class SearcherFiles(Protocol):
    """The file I/O a searcher's state may need, done by the process that holds the searcher."""

    def written(self, write: Callable[[str], Any]) -> bytes | None:
        """``write(path)`` on a new temporary file; the file's bytes (None if it wrote none)."""

    def read_back(self, data: bytes, read: Callable[[str], Any]) -> None:
        """``read(path)`` on a temporary file holding ``data``."""

    def save_to_dir(self, searcher: Any, checkpoint_dir: str, session_str: str) -> None:
        """Ray's ``Searcher.save_to_dir``."""

    def restore_from_dir(self, searcher: Any, checkpoint_dir: str) -> bool:
        """Ray's ``Searcher.restore_from_dir`` from the newest ``searcher-state-*.pkl`` in ``checkpoint_dir``;
        False if it has none."""

    def experiment_searcher_state(self, path: str) -> Any:
        """The searcher state the experiment at ``path`` (any storage URL) last saved, decoded; raises
        naming what is missing."""


#: set when ``actors._searcher_files`` is imported (:func:`files` imports it when first asked)
FILES: SearcherFiles | None = None


def files() -> SearcherFiles:
    if FILES is None:  # (a script that imported only actors.search): the port is installed on import
        from actors import _searcher_files  # noqa: F401
    assert FILES is not None, "actors._searcher_files installs the port"
    return FILES


_WRITES_A_FILE: dict[type, bool] = {}  # per class: its save's signature is read once (every state write asks)


def writes_a_file(searcher: Any) -> bool:
    """Whether ``searcher.save`` needs a path (Ray's ``save(self, checkpoint_path)``), where audition's
    ``save()`` takes none (or, in audition's own plugins, an optional one)."""
    cls, own = type(searcher), "save" in getattr(searcher, "__dict__", ())  # (an instance's own save: not cached)
    if not own and cls in _WRITES_A_FILE:
        return _WRITES_A_FILE[cls]
    try:
        params = inspect.signature(searcher.save).parameters.values()
    except (AttributeError, TypeError, ValueError):
        return False
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    writes = bool(positional) and positional[0].default is inspect.Parameter.empty
    if not own:
        _WRITES_A_FILE[cls] = writes
    return writes


def state_of(searcher: Any) -> Any:
    """What the engine keeps of ``searcher``: its ``save()``, or for a file-writing searcher the file
    its ``save(path)`` wrote (None if it wrote none, as Ray then keeps none). ``NotImplementedError``
    passes through: the caller warns that the searcher's state is not saved, as Ray does."""
    if not writes_a_file(searcher):
        return searcher.save()
    data = files().written(searcher.save)
    return None if data is None else {"kind": type(searcher).__name__, RAY_FILE: data}


def load_state(searcher: Any, state: Any) -> None:
    """``searcher.restore`` of what :func:`state_of` kept (nothing for None): a file-writing searcher's
    bytes are written to a file for its ``restore(path)``."""
    if state is None:
        return
    if isinstance(state, dict) and RAY_FILE in state:
        files().read_back(state[RAY_FILE], searcher.restore)
    else:
        searcher.restore(state)
