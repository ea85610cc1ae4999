"""PBT clones waiting for their source's checkpoint (``PopulationBasedTraining(wait_for_checkpoint=True)``).

A clone decided while its source's save is in flight must start from the checkpoint that save commits,
as Ray Tune's PBT waits for it (``_FutureTrainingResult.resolve()``): until the save lands (or the source's
run ends) the clone is not started, and it is not counted as a trial that could take free room.
"""

from __future__ import annotations

from actors._engine.lifecycle import Effect, TrialTable
from actors._engine.trial import TrialStatus
from actors.messages import CheckpointRef, SchedulerAction


class CloneWaits:
    """Per clone, the source whose save in flight it waits for."""

    def __init__(self, table: TrialTable) -> None:
        self.table = table
        self.waits: dict[str, str] = {}  # clone -> the source whose save in flight it waits for

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
        if it gave none (``TrialTable.drop_clone``); whether any was waiting, and the effects of the clones
        applied now."""
        waiting = [t for t, s in self.waits.items() if s == source_id]
        effects: list[Effect] = []
        for target in waiting:
            del self.waits[target]
            if ckpt is not None or target == source_id:  # (onto itself: PBT replay's config change goes on)
                effects += self.table.source_saved(target, source_id, ckpt)
            else:
                self.table.drop_clone(target, source_id)
        return bool(waiting), effects


__all__ = ["CloneWaits"]
