"""``Tuner.restore``'s side in the controller: a saved experiment state loaded into a fresh trial table.

The storage is first brought in line with the state (``actors._shell.restore_storage.prepare_storage``:
checkpoints and results the state never named); then each saved row becomes a trial again, and what
``ExperimentIO`` keeps per trial (logged iterations, checkpoint numbering, retention) is rebuilt.
"""

from __future__ import annotations

import copy
import traceback
from dataclasses import dataclass
from typing import Any

from actors._engine.lifecycle import TrialTable
from actors._engine.store import RestoreNotes
from actors._engine.trial import TrialStatus
from actors._legacy import loads as legacy_loads
from actors._shell.experiment_state import StateRestoreFailed, unb64
from actors.messages import CheckpointRef
from actors.search._file_state import load_state
from storage import ExperimentLayout, StorageContext


@dataclass(frozen=True)
class Restored:
    """What a restore rebuilt beside the table, for ``ExperimentIO`` to keep."""

    suggested: int  # how many trials the searcher had suggested
    search_closed: bool  # the search was ended for good (store.SearchProgress)
    scheduler: bytes | None  # the scheduler's saved state
    logged_iter: dict[str, int]  # per trial: the last iteration in its history
    max_index: dict[str, int]  # per trial: the highest checkpoint index it used
    ckpts: dict[str, list[CheckpointRef]]  # per trial: the checkpoints kept (num_to_keep)
    state_refs: set[str]  # checkpoints the state names: never deleted
    notes: RestoreNotes


def _restore_plugins(state: dict[str, Any], searcher: Any, stopper: Any) -> None:
    """The searcher's and stopper's saved states handed back; their ``restore`` is the user's code, so
    one that raises ends the run with ``StateRestoreFailed`` naming it (and its traceback)."""
    for kind, plugin, restore in (("searcher", searcher, load_state),
                                  ("stopper", stopper, lambda p, saved: p.restore(saved))):
        if state.get(kind) is None or plugin is None or not hasattr(plugin, "restore"):
            continue
        try:
            restore(plugin, legacy_loads(unb64(state[kind]) or b""))
        except Exception as exc:
            name = type(plugin).__name__
            raise StateRestoreFailed(
                f"{name}.restore() raised {type(exc).__name__}: {exc} (handed the {kind}'s state the experiment "
                f"saved); fix {name}.restore() so it takes what its save() returned, then restore again (this "
                f"attempt removed nothing the experiment saved)\n{''.join(traceback.format_exception(exc))}") from exc


def restore_table(saved: dict[str, Any], ctx: StorageContext, layout: ExperimentLayout, table: TrialTable,
                  searcher: Any, stopper: Any, num_to_keep: int | None) -> Restored:
    """Add the trials of ``saved`` to ``table`` and restore the searcher's and stopper's states."""
    from actors._engine.marks import marks_from_rows
    from actors._engine.store import RestoreMark
    from actors._shell.experiment_state import TRIAL_DIRS_NAMED, saved_dirname, saved_dirname_custom
    from actors._shell.restore_storage import prepare_storage

    state = copy.deepcopy(saved)
    older = state.get("trial_dirs") != TRIAL_DIRS_NAMED
    for row in state["trials"]:
        if row.get("restore") == RestoreMark.RESTART:  # a new trial: its directory is named when it starts
            row["dirname_custom"], row["dirname"] = False, None
            continue
        row["dirname_custom"] = saved_dirname_custom(state, row)  # (before an older state's trial id fills in)
        row["dirname"] = saved_dirname(state, row)
        if older:  # saved by an older audition: every trial's files are in its trial id's directory already
            row["opened"] = True
        layout.set_dirname(row["trial_id"], row.get("dirname"))
    _restore_plugins(state, searcher, stopper)  # (first: one that fails has changed nothing in storage)
    kept = prepare_storage(ctx, layout, state)
    scheduler = unb64(state.get("scheduler"))
    logged_iter: dict[str, int] = {}
    max_index: dict[str, int] = {}
    ckpts: dict[str, list[CheckpointRef]] = {}
    state_refs: set[str] = set()
    notes = RestoreNotes()
    for row in state["trials"]:
        rec = table.add(row["trial_id"], row["config"])
        table.set_status(rec, TrialStatus(row["status"]))
        rec.name, rec.dirname = row.get("name"), row.get("dirname")  # absent: no name creator; not started
        rec.dirname_custom = row["dirname_custom"]
        rec.opened = bool(row.get("opened"))
        rec.tag = str(row.get("experiment_tag") or "")  # absent: worked out from the config (TrialSource)
        if isinstance(row.get("resources"), dict):  # (absent: the experiment's resources_per_trial)
            rec.resources = {str(k): float(v) for k, v in row["resources"].items()}
        rec.last_result = row["last_result"]
        rec.num_failures = row["num_failures"]
        rec.error = row.get("error")
        rec.traceback = row.get("traceback")
        rec.marks = marks_from_rows(row.get("marks", []))  # absent in states written before marks
        ck = row.get("checkpoint")
        rec.checkpoint = CheckpointRef(**ck) if ck else None
        rec.iteration = rec.checkpoint.iteration if rec.checkpoint else int(
            rec.last_result.get("training_iteration", 0))
        logged_iter[rec.trial_id] = int(row.get("logged_iteration", rec.iteration))
        max_index[rec.trial_id] = int(row.get("max_index", -1))
        if rec.checkpoint is not None:
            state_refs.add(rec.checkpoint.path)
        if num_to_keep is not None and kept.get(rec.trial_id):
            ckpts[rec.trial_id] = kept[rec.trial_id]
        if row.get("unseen"):
            notes.unseen[rec.trial_id] = row["unseen"]
        if row.get("restore") == RestoreMark.END:
            notes.ended.append(rec.trial_id)
    return Restored(int(state["suggested"]), bool(state.get("search_closed", False)),
                    scheduler, logged_iter, max_index, ckpts, state_refs, notes)


__all__ = ["Restored", "restore_table"]
