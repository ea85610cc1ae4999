"""Which callback hooks a trial's save calls, as Ray 2.60 calls them (pure)."""

from __future__ import annotations

from enum import Enum

from actors.messages import CheckpointRef, SaveKind


class SaveHooks(Enum):
    """What the controller tells the driver's callbacks about one finished save."""

    NONE = "none"  # a pause's save at the result that brought the checkpoint: Ray calls neither hook
    SAVED = "saved"  # the trial's checkpoint is older than its iteration (a function trainable): on_trial_save
    CHECKPOINT = "checkpoint"  # on_checkpoint and on_trial_save


def save_hooks(known: CheckpointRef | None, iteration: int, saved: CheckpointRef, kind: SaveKind) -> SaveHooks:
    """``saved`` answered a save of ``kind`` of a trial at ``iteration`` whose checkpoint was ``known``.

    A function trainable's save returns its last result's checkpoint (Ray's ``save_checkpoint`` returns
    ``_last_training_result``): a scheduler's save then announces that one again, both hooks with the same
    path (recorded from Ray 2.60, PBT's source save); a save at a result without one calls on_trial_save alone.
    """
    if known is None or known.path != saved.path:
        return SaveHooks.CHECKPOINT
    if known.iteration != iteration:
        return SaveHooks.SAVED
    return SaveHooks.CHECKPOINT if kind is SaveKind.SCHEDULER else SaveHooks.NONE


__all__ = ["SaveHooks", "save_hooks"]
