"""PBT clones waiting for their source's checkpoint (``PopulationBasedTraining(wait_for_checkpoint=True)``).

A clone decided while its source's save is in flight must start from the checkpoint that save commits,
as Ray Tune's PBT waits for it (``_FutureTrainingResult.resolve()``): until the save lands (or the source's
run ends) the clone is not started, and it is not counted as a trial that could take free room. When it
lands the clone takes it (``TrialTable.apply_clone``), or is dropped if it gave none, as Ray's PBT skips an
exploit whose source has no checkpoint.
"""

from __future__ import annotations

from actors._engine.lifecycle import Effect, TrialTable
from actors._engine.marks import MarkKind
from actors._engine.trial import TrialStatus
from actors.messages import CheckpointRef, SchedulerAction


class CloneWaits:
    """Per clone, the source whose save in flight it waits for."""

    def __init__(self, table: TrialTable) -> None:
        self.table = table
        self.waits: dict[str, str] = {}  # clone -> the source whose save in flight it waits for
        # (clone, source) of the exploits skipped since the scheduler's last call: its next call tells it, so a
        # scheduler that recorded the exploit (PBT's clocks, its exploit list) takes it back
        self.skipped: list[tuple[str, str]] = []

    def skip(self, trial_id: str, source_id: str) -> None:
        """An exploit the scheduler asked for is not applied (its source has no checkpoint to give)."""
        self.skipped.append((trial_id, source_id))

    def take_skipped(self) -> tuple[tuple[str, str], ...]:
        """The skipped exploits the scheduler has not heard of yet (then forgotten)."""
        if not self.skipped:  # (every scheduler call asks: nothing built then)
            return ()
        out, self.skipped = tuple(self.skipped), []
        return out

    def __contains__(self, trial_id: str) -> bool:
        """Whether the trial is a clone still waiting (it must not start yet)."""
        return trial_id in self.waits

    def would_wait(self, action: SchedulerAction) -> bool:
        """Whether a clone asked to wait for its source's save would wait: the source runs with a save in flight."""
        src = self.table.trials.get(action.source_id or "")
        return (action.wait_for_source and src is not None and src.status is TrialStatus.RUNNING
                and src.saves_inflight > 0)

    def note(self, action: SchedulerAction) -> None:
        """After a scheduler's request: a clone asked to wait for its running source's save in flight waits."""
        if self.would_wait(action):
            self.waits[action.trial_id] = action.source_id or ""

    def blocked(self) -> int:
        """How many waiting trials are clones that cannot start yet."""
        return sum(1 for t in self.waits if self.table.get(t).status is not TrialStatus.RUNNING
                   ) if self.waits else 0

    def landed(self, source_id: str, ckpt: CheckpointRef | None) -> tuple[bool, list[Effect]]:
        """A save (or the end) of a source: its clones take its checkpoint, or a clone of another trial is dropped
        if it gave none; whether any was waiting, and the effects of the clones applied now."""
        waiting = [t for t, s in self.waits.items() if s == source_id]
        effects: list[Effect] = []
        for target in waiting:
            del self.waits[target]
            if ckpt is not None or target == source_id:  # (onto itself: PBT replay's config change goes on)
                effects += self._take(target, source_id, ckpt)
            else:
                self._drop(target, source_id)
        return bool(waiting), effects

    def _take(self, trial_id: str, source_id: str, checkpoint: CheckpointRef | None) -> list[Effect]:
        """The save of ``source_id`` a clone of ``trial_id`` waited for has landed: the clone takes it (None: a
        trial cloned onto itself, PBT replay's config change, whose own save gave none, goes on without one)."""
        rec = self.table.trials.get(trial_id)
        # the clone is kept until the trial's next start (which waits for this save): none, it was dropped
        if rec is None or rec.clone is None or rec.clone.source_id != source_id:
            return []
        if rec.status is TrialStatus.RUNNING:  # still pausing: the clone applies it when the pause ends
            rec.clone_checkpoint, rec.clone_waiting = checkpoint, False
        elif rec.status in (TrialStatus.PENDING, TrialStatus.PAUSED):
            if rec.clone_waiting:  # paused for it already, not applied yet: applied now
                rec.clone_checkpoint, rec.clone_waiting = checkpoint, False
                return self.table.apply_clone(rec)
            if checkpoint is not None:  # (applied already)
                rec.checkpoint = checkpoint
                self.table.changed.add(trial_id)
        return []

    def _drop(self, trial_id: str, source_id: str) -> None:
        """The source of a clone of ``trial_id`` gave no checkpoint (its save in flight died with its run, its
        run ended without one): the exploit is skipped, as Ray's PBT skips one whose source has no checkpoint.
        The trial goes on as it was: its config, its tag, its own checkpoint (it paused for the clone)."""
        rec = self.table.trials.get(trial_id)
        if rec is None or rec.clone is None or rec.clone.source_id != source_id:
            return
        if rec.status is not TrialStatus.RUNNING and not rec.clone_waiting:
            return  # applied already (it did not wait): kept, as before
        rec.clone, rec.clone_checkpoint, rec.clone_waiting = None, None, False
        self.skip(trial_id, source_id)
        if rec.status in (TrialStatus.PENDING, TrialStatus.PAUSED):  # its pause has landed: it was a plain pause
            self.table.mark(rec, MarkKind.PAUSE)
        self.table.changed.add(trial_id)


__all__ = ["CloneWaits"]
