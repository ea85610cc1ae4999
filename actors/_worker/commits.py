"""A run's checkpoints, committed to storage by the worker thread itself.

Each commit takes the next index, writes the checkpoint with a manifest (its iteration, time, the
whole result as Ray's ``best_checkpoints`` hold it, and the results the controller has not
acknowledged since the previous checkpoint, so they survive the process dying right after the
commit) and becomes the run's latest checkpoint. A permanent storage error is kept: the run fails
even if the user's code caught it.
"""

from __future__ import annotations

import json
import posixpath
import shutil
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from actors._driver.checkpoint import Checkpoint
from actors._state_codec import pickled_exactly
from actors._tempdirs import owned_tempdir
from actors.messages import CheckpointRef

if TYPE_CHECKING:
    from actors._driver.trainable import Trainable
    from actors._engine.horizon import ResultWindow
    from storage import ExperimentLayout, StorageContext


class CheckpointCommits:
    """The checkpoints one run committed: the next index, the latest one and the iteration it holds."""

    def __init__(self, ctx: StorageContext, layout: ExperimentLayout, trial_id: str, next_index: int,
                 latest: CheckpointRef | None, iteration: int) -> None:
        self.ctx = ctx
        self.layout = layout
        self.trial_id = trial_id
        self.next_index = next_index
        self.latest = latest
        self.committed_iteration = iteration
        # a permanent storage error while committing a checkpoint (after the storage package's own
        # retries): the run fails even if the user's code caught it, and the experiment stops
        self.storage_failure: str | None = None

    def next_name(self) -> str:
        """The directory name of the next checkpoint (Ray's ``checkpoint_dir_name``)."""
        return posixpath.basename(self.layout.checkpoint_dir(self.trial_id, self.next_index))

    def saved_at(self, iteration: int) -> bool:
        """The trainable's state at ``iteration`` is committed already (checkpoint_frequency, or a
        checkpoint reported with it): a pause's or the end's save adds nothing (Ray makes none)."""
        return self.latest is not None and self.committed_iteration == iteration

    def save(self, trainable: Trainable, result: dict[str, Any] | None, iteration: int, time_total: float,
             window: ResultWindow) -> CheckpointRef:
        """Save a class trainable (``save_checkpoint`` into a scratch directory) and commit it."""
        tmp = owned_tempdir("save")  # (swept, should this process be killed while saving)
        try:
            out = trainable.save_checkpoint(tmp)
            if isinstance(out, dict):
                ck = Checkpoint.from_dict(out)
                return self.commit(ck, result, iteration, time_total, window)
            return self.commit(Checkpoint(tmp), result, iteration, time_total, window)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    def commit(self, checkpoint: Checkpoint, result: dict[str, Any] | None, iteration: int, time_total: float,
               window: ResultWindow) -> CheckpointRef:
        from storage import commit_checkpoint

        with checkpoint.as_directory() as local:
            ref = self.commit_with(lambda dest, meta: commit_checkpoint(self.ctx, dest, local, meta), result,
                                   iteration, time_total, window)
        checkpoint._release()
        return ref

    def commit_with(self, put: Callable[[str, dict[str, Any]], object], result: dict[str, Any] | None, iteration: int,
                    time_total: float, window: ResultWindow) -> CheckpointRef:
        """Take the next index, and ``put(dest, manifest metadata)`` the checkpoint there (a storage error is kept
        and raised); it becomes the run's latest. (The simulator's runs put theirs without files.)"""
        from storage import StorageError

        index = self.next_index
        self.next_index += 1
        dest = self.layout.checkpoint_dir(self.trial_id, index)
        meta = checkpoint_meta(iteration, time_total, result, self._unconfirmed(window, iteration))
        try:
            put(dest, meta)
        except StorageError as exc:
            self.storage_failure = str(exc)
            raise
        ref = CheckpointRef(dest, index, iteration, time_total, meta["metrics"])
        self.latest = ref
        self.committed_iteration = iteration
        return ref

    def _unconfirmed(self, window: ResultWindow, iteration: int) -> list[dict[str, Any]]:
        """Results after the previous checkpoint that the controller may not have (JSON-safe).

        Acknowledged results were logged; those up to the previous checkpoint are in that
        checkpoint's manifest, or the controller logged them when it heard of that checkpoint.
        """
        from storage._io import dumps_result

        rows = window.unconfirmed(self.committed_iteration, iteration)
        out: list[dict[str, Any]] = json.loads(dumps_result(rows))
        return out


def checkpoint_meta(iteration: int, time_total: float, result: dict[str, Any] | None,
                    results: list[dict[str, Any]]) -> dict[str, Any]:
    """What a checkpoint's manifest holds (a real trial's and a simulated one's): its iteration and time, the
    whole result it was saved at, nested values and config included, as Ray's ``best_checkpoints`` hold it
    (``metrics``: JSON-safe, what retention scores; ``metrics_pickled`` too when JSON would change the values,
    which ``Result.best_checkpoints`` loads), and the results the controller may not have (``results``)."""
    from storage._io import dumps

    meta = {"iteration": iteration, "time_total_s": time_total, "metrics": json.loads(dumps(result or {})),
            "results": results}
    exact = pickled_exactly(result or {})
    if exact is not None:
        meta["metrics_pickled"] = exact
    return meta


__all__ = ["CheckpointCommits", "checkpoint_meta"]
