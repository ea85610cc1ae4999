"""A searcher's state when the searcher was written for Ray Tune: ``save(checkpoint_path)`` writes a file.

Ray Tune's ``Searcher`` saves and restores through files: Tune calls ``save(path)`` on a file of its
choosing and later ``restore(path)`` on it, and its guide shows custom searchers that pickle
themselves that way. audition's plugins return their state from ``save()`` instead. The engine
goes through :func:`state_of` and :func:`load_state` to reach any searcher, so one written either
way runs: a file-writing searcher's state is the bytes of its file (held as ``{"kind": <class
name>, RAY_FILE: bytes}``), written back to a file for its ``restore(path)``. This module, not
``_searcher``, does that file I/O (in a temporary directory of the process that holds the searcher).
"""

from __future__ import annotations

import glob
import inspect
import logging
import os
import tempfile
import uuid
from typing import Any

log = logging.getLogger("audition")

#: the key of a file-writing searcher's saved state that holds its file's bytes
RAY_FILE = "ray_file"
#: Ray's name for a searcher's file in a directory (``Searcher.CKPT_FILE_TMPL``)
CKPT_FILE_TMPL = "searcher-state-{}.pkl"


def writes_a_file(searcher: Any) -> bool:
    """Whether ``searcher.save`` needs a path (Ray's ``save(self, checkpoint_path)``), where audition's
    ``save()`` takes none (or, in audition's own plugins, an optional one)."""
    try:
        params = inspect.signature(searcher.save).parameters.values()
    except (AttributeError, TypeError, ValueError):
        return False
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return bool(positional) and positional[0].default is inspect.Parameter.empty


def state_of(searcher: Any) -> Any:
    """What the engine keeps of ``searcher``: its ``save()``, or for a file-writing searcher the file
    its ``save(path)`` wrote (None if it wrote none, as Ray then keeps none). ``NotImplementedError``
    passes through: the caller warns that the searcher's state is not saved, as Ray does."""
    if not writes_a_file(searcher):
        return searcher.save()
    with tempfile.TemporaryDirectory(prefix="audition-searcher-") as tmp:
        path = os.path.join(tmp, CKPT_FILE_TMPL.format("default"))
        searcher.save(path)
        if not os.path.exists(path):
            return None
        with open(path, "rb") as f:
            return {"kind": type(searcher).__name__, RAY_FILE: f.read()}


def load_state(searcher: Any, state: Any) -> None:
    """``searcher.restore`` of what :func:`state_of` kept (nothing for None): a file-writing searcher's
    bytes are written to a file for its ``restore(path)``."""
    if state is None:
        return
    if not (isinstance(state, dict) and RAY_FILE in state):
        searcher.restore(state)
        return
    with tempfile.TemporaryDirectory(prefix="audition-searcher-") as tmp:
        path = os.path.join(tmp, CKPT_FILE_TMPL.format("default"))
        with open(path, "wb") as f:
            f.write(state[RAY_FILE])
        searcher.restore(path)


def save_to_dir(searcher: Any, checkpoint_dir: str, session_str: str) -> None:
    """Ray's ``save_to_dir``: the state in ``checkpoint_dir/searcher-state-<session_str>.pkl``, written
    to a hidden file first and renamed, so a reader never sees half of it. A searcher without a
    ``save`` is skipped with a warning, as Ray skips it."""
    import cloudpickle

    name = CKPT_FILE_TMPL.format(session_str)
    tmp = os.path.join(checkpoint_dir, f".{uuid.uuid4()}-tmp-{name}")
    try:
        if writes_a_file(searcher):
            searcher.save(tmp)
        else:
            state = searcher.save()
            with open(tmp, "wb") as f:
                cloudpickle.dump(state, f)
    except NotImplementedError:
        log.warning("%s does not implement save(); save_to_dir(%r) wrote nothing", type(searcher).__name__,
                    checkpoint_dir)
        if os.path.exists(tmp):
            os.remove(tmp)
        return
    if os.path.exists(tmp):
        os.replace(tmp, os.path.join(checkpoint_dir, name))


def newest_file(checkpoint_dir: str) -> str | None:
    """The newest ``searcher-state-*.pkl`` in ``checkpoint_dir`` (the greatest name, as Ray picks it;
    its session strings are timestamps), None if there is none."""
    found = glob.glob(os.path.join(glob.escape(os.path.expanduser(checkpoint_dir)), CKPT_FILE_TMPL.format("*")))
    return max(found) if found else None


def restore_from_file(searcher: Any, path: str) -> None:
    """``searcher`` restored from a file :func:`save_to_dir` (or Ray's) wrote."""
    if writes_a_file(searcher):
        searcher.restore(path)
        return
    from actors._legacy import loads

    with open(path, "rb") as f:
        load_state(searcher, loads(f.read()))
