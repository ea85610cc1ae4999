"""The experiment core's port to storage: what it asks of the experiment's files, nothing more.

The core calls these synchronously, from ``ExperimentCore.handle``, because their answers decide
its next step (a retry resumes from what ``recover`` found; a restart numbers its checkpoints from
``next_checkpoint_index``). The shell passes ``actors._shell.experiment_io.ExperimentIO`` (fsspec
storage); the simulator passes the same class over ``memory://`` storage, wrapped to inject write
failures. A method may raise; the core ends the experiment with the message its ``explain``
callable gives for that exception.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol

from actors._engine.lifecycle import TrialRecord, TrialTable
from actors.messages import CheckpointRef, TrialSummary

# the saved experiment state's format (its "version"): what a store writes and Tuner.restore reads
STATE_VERSION = 1
# the state's "trial_dirs": each row has its "dirname" once the trial started, and "opened" (its first
# files written); a state without it (older audition) has every trial's directory at its trial id
TRIAL_DIRS_NAMED = "named"


class RestoreMark(StrEnum):
    """What ``Tuner.restore`` does to a saved trial (its row's ``"restore"``, set by the driver, carried out by
    the controller before any trial starts); rows without one are left as saved."""

    RESUME = "resume"  # continue from the saved checkpoint (or from scratch without one)
    RESTART = "restart"  # a new trial replacing the saved one, from scratch (restart_errored)
    END = "end"  # unfinished, but resume_unfinished=False: ends TERMINATED as saved


class Recovered(Protocol):
    """What ``recover`` found: result rows the run committed but never sent, usable checkpoints."""

    @property
    def rows(self) -> list[dict[str, Any]]: ...

    @property
    def usable(self) -> list[CheckpointRef]: ...


@dataclass(frozen=True)
class SearchProgress:
    """How far the search went, saved with the experiment: the trials suggested, and whether the search
    was ended for good (a stopper's ``stop_all``, ``fail_fast``, the searcher's ``FINISHED``: Ray's
    ``set_finished``, so a restored run draws no more trials, as Ray's does not)."""

    suggested: int = 0
    closed: bool = False


@dataclass
class RestoreNotes:
    """``unseen``: trials resumed from a checkpoint newer than the saved state -> the rows up to it
    that the state (its stopper, scheduler, searcher) never saw. ``ended``: unfinished trials the
    restore ended (``resume_unfinished=False``), still live for the restored searcher and scheduler."""

    unseen: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    ended: list[str] = field(default_factory=list)


class ExperimentStore(Protocol):
    """Trial and experiment files. Called only from the core, one call at a time."""

    trial_prefix: str  # the trial ids' prefix (kept across restores)
    dirty: bool  # a trial paused, stopped or finished since the last snapshot

    def restore_into(self, table: TrialTable, searcher: Any) -> SearchProgress:
        """Load a saved table (Tuner.restore) into ``table``; how far the search had gone."""

    def take_restored(self) -> RestoreNotes:
        """What restoring did that the searcher and scheduler must hear of (asked once, when the
        scheduler is ready); empty on a first run."""

    def end_restored(self, rec: TrialRecord) -> None:
        """A restored trial ends before it runs again (its history's last row says done)."""

    def scheduler_state(self) -> bytes | None:
        """The scheduler's saved state, to hand back to it on resume."""

    def on_add(self, rec: TrialRecord) -> None: ...

    def on_first_start(self, rec: TrialRecord) -> None:
        """The trial starts for the first time (its directory is named): its first files."""
        ...

    def on_start(self, rec: TrialRecord) -> None: ...

    def on_results(self, rec: TrialRecord, results: tuple[dict[str, Any], ...]) -> str | None:
        """Log results; a message if they cannot be accepted (the experiment then stops)."""

    def amend_result(self, rec: TrialRecord, result: dict[str, Any]) -> str | None:
        """Rewrite the trial's last logged row as ``result`` (a callback changed it); a message if it
        cannot be written (the experiment then stops)."""

    def on_checkpoint(self, rec: TrialRecord, ckpt: CheckpointRef) -> None: ...

    def checkpoint_uri(self, ckpt: CheckpointRef) -> str:
        """The checkpoint's URL as users see it (callbacks)."""

    def recover(self, rec: TrialRecord) -> Recovered | None: ...

    def next_checkpoint_index(self, rec: TrialRecord) -> int: ...

    def abandon_unseen(self, rec: TrialRecord) -> None:
        """A PBT exploit took effect: what the trial's runs committed unseen is of the lineage it leaves (never
        resumed from)."""

    def fence(self, trial_id: str) -> None: ...

    def on_error(self, rec: TrialRecord, error: str, tb: str) -> None: ...

    def on_finished(self, rec: TrialRecord) -> None: ...

    def log_policy(self, trial_id: str, source_id: str, line: str) -> None:
        """One PBT exploit, a JSON line for Ray's ``pbt_global.txt`` and ``pbt_policy_<trial_id>.txt``."""

    def state_due(self) -> bool: ...

    def freeze(self, table: TrialTable, searcher: Any, progress: SearchProgress, tag: int | None = None) -> None: ...

    def snapshot_table(self, table: TrialTable, searcher: Any, progress: SearchProgress,
                       tag: int | None = None) -> None: ...

    def scheduler_saved(self, blob: bytes, tag: int | None = None) -> None: ...

    def scheduler_state_lost(self) -> None:
        """The scheduler's state to pair with the last snapshot will not come: never write them unpaired."""

    def close(self, final: bool) -> None: ...

    def summary(self, r: TrialRecord) -> TrialSummary: ...


__all__ = ["STATE_VERSION", "TRIAL_DIRS_NAMED", "ExperimentStore", "Recovered"]
