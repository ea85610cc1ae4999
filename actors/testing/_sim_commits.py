"""A simulated run's checkpoints: the real worker's bookkeeping (``CheckpointCommits``: the next index, the
latest checkpoint, the iteration it holds, the manifest with the results the controller may not have, a
storage failure kept for the run's end), committed without files by the simulator's commit function
(``sim_store.commit_empty``, or one failing as ``Faults`` say)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from actors._engine.horizon import ResultWindow
from actors._worker.commits import CheckpointCommits
from actors.messages import CheckpointRef
from storage import ExperimentLayout, StorageContext

Commit = Callable[[StorageContext, str, dict[str, Any]], None]


class SimCommits(CheckpointCommits):
    """``CheckpointCommits`` whose ``commit_result`` hands the manifest to ``commit`` (no trainable to save)."""

    def __init__(self, ctx: StorageContext, layout: ExperimentLayout, trial_id: str, next_index: int,
                 latest: CheckpointRef | None, iteration: int, commit: Commit) -> None:
        super().__init__(ctx, layout, trial_id, next_index, latest, iteration)
        self._commit = commit

    def commit_result(self, result: dict[str, Any] | None, iteration: int, time_total: float,
                      window: ResultWindow) -> CheckpointRef:
        """Commit the state at ``iteration`` as the worker does (``commit_with``), with no files."""
        return self.commit_with(lambda dest, meta: self._commit(self.ctx, dest, meta), result, iteration, time_total,
                                window)


__all__ = ["Commit", "SimCommits"]
