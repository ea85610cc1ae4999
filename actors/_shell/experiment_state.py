"""What a saved experiment state holds, encoded: each trial's row and the searcher's and stopper's states.

The state file (``storage.StateWriter``) is JSON: a row of plain values per trial, and the plugins'
saved states cloudpickled and base64'd (they may hold the user's ``sample_from`` functions).
``ExperimentIO`` decides when a state is written; ``experiment_restore`` reads one back.
"""

from __future__ import annotations

import base64
import logging
import pickle
from typing import Any

import cloudpickle

from actors._engine.lifecycle import TrialRecord
from actors._engine.naming import saved_dirname_custom
from actors._engine.store import STATE_VERSION, TRIAL_DIRS_NAMED
from actors.search._file_state import state_of

log = logging.getLogger("audition")


class StateSaveFailed(Exception):
    """A searcher's or stopper's state could not be saved, so neither can the experiment's: the message
    names which, what it raised and what to do (the controller ends the run with it)."""


class StateRestoreFailed(Exception):
    """A searcher's or stopper's ``restore`` raised on the state the experiment saved: the message names
    which, what it raised and what to do (the controller ends the run with it, before any file changed)."""


class SavedStates:
    """The searcher's and stopper's saved states, encoded; the last text is reused while one is unchanged."""

    def __init__(self) -> None:
        self.encoded: dict[str, tuple[bytes, str | None]] = {}  # searcher/stopper: (plain pickle, its text)
        self.unsaved_searcher = False  # a searcher without save() was warned about

    def searcher(self, searcher: Any) -> str | None:
        """The searcher's saved state; None (warned once) for one without ``save()``: as in Ray Tune,
        it still runs, and a resumed experiment starts it anew."""
        if searcher is None:
            return None
        try:
            saved = state_of(searcher)
        except NotImplementedError as exc:
            if not self.unsaved_searcher:
                self.unsaved_searcher = True
                log.warning("%s: its state is not saved with the experiment (as in Ray Tune), so a resumed "
                            "run starts it anew", exc)
            return None
        except Exception as exc:
            raise StateSaveFailed(
                f"{type(searcher).__name__}.save() raised {type(exc).__name__}: {exc} (the experiment's state holds "
                "the searcher's; fix save(), or raise NotImplementedError there to run without saving it, as "
                "Ray Tune allows)") from exc
        return self.encode("searcher", saved)

    def stopper(self, stopper: Any) -> str | None:
        """The stopper's saved state (None for one without ``save()``)."""
        if stopper is None or not hasattr(stopper, "save"):
            return None
        try:
            saved = stopper.save()
        except Exception as exc:
            raise StateSaveFailed(f"{type(stopper).__name__}.save() raised {type(exc).__name__}: {exc} (the "
                                  "experiment's state holds the stopper's; fix save())") from exc
        return self.encode("stopper", saved)

    def encode(self, what: str, saved: Any) -> str | None:
        """``saved`` cloudpickled and base64'd, reusing the last text while the state is unchanged.

        A search space is pickled at every state write though only its counters move, and
        cloudpickle is pure Python: the plain (C) pickle of the state, when it has one, tells
        whether anything changed (equal bytes: equal values, the same classes and functions).
        """
        try:
            key: bytes | None = pickle.dumps(saved, protocol=pickle.HIGHEST_PROTOCOL)
        except Exception:  # a lambda, a local class: only cloudpickle can say it
            key = None
        last = self.encoded.get(what)
        if key is not None and last is not None and last[0] == key:
            return last[1]
        try:
            text = b64(cloudpickle.dumps(saved))
        except Exception as exc:
            raise StateSaveFailed(f"the {what}'s saved state could not be pickled ({type(exc).__name__}: {exc}); "
                                  f"make what its save() returns picklable") from exc
        if key is not None:
            self.encoded[what] = (key, text)
        return text


def trial_row(r: TrialRecord, logged_iteration: int, max_index: int) -> dict[str, Any]:
    """A trial as the state saves it (``experiment_restore.restore_table`` reads it back)."""
    c = r.checkpoint
    row = {
        "trial_id": r.trial_id, "config": r.config, "status": r.status.value,
        "last_result": r.last_result, "num_failures": r.num_failures, "error": r.error,
        "traceback": r.traceback,
        "checkpoint": None if c is None else {
            "path": c.path, "index": c.index, "iteration": c.iteration,
            "time_total_s": c.time_total_s, "metrics": c.metrics},
        "logged_iteration": logged_iteration,
        "max_index": max_index,
        "marks": [m.to_dict() for m in r.marks] if r.marks else [],
    }
    if r.name:  # (after the others: the same key order as always)
        row["name"] = r.name
    if r.dirname:  # with whether trial_dirname_creator gave it (Ray's Trial.custom_dirname is None if not)
        row["dirname"], row["dirname_custom"] = r.dirname, r.dirname_custom
    if r.opened:
        row["opened"] = True
    # a PBT exploit's (Ray's restored Trial keeps it), or a restarted trial's (its id has no index to work it
    # out from); the others are worked out again
    if "@" in r.tag or "_" not in r.trial_id:
        row["experiment_tag"] = r.tag
    if r.resources is not None:  # its own, from the resources function (Ray's restored Trial keeps them)
        row["resources"] = r.resources
    return row


def b64(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode("ascii")


def saved_dirname(state: dict[str, Any], row: dict[str, Any]) -> str | None:
    """The directory name of the trial saved as ``row`` in ``state``: its ``dirname``; in a state written
    before trials were named as Ray names them, its trial id; None for a trial that never started."""
    name = row.get("dirname")
    if isinstance(name, str) and name:
        return name
    return None if state.get("trial_dirs") == TRIAL_DIRS_NAMED else str(row["trial_id"])


def unb64(data: str | None) -> bytes | None:
    return None if data is None else base64.b64decode(data)


__all__ = ["STATE_VERSION", "TRIAL_DIRS_NAMED", "SavedStates", "StateSaveFailed", "b64", "saved_dirname",
           "saved_dirname_custom", "trial_row", "unb64"]
