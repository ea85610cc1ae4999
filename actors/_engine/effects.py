"""What the trial table asks the controller to do (``Effect``), and where a running trial is in
its step/decide cycle (``Phase``): the vocabulary ``TrialTable`` answers in, kept apart from its rules."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from actors.messages import SaveKind


class Phase(Enum):
    """Where a RUNNING trial is in its step/decide cycle (IDLE when not running)."""

    IDLE = "idle"
    STEPPING = "stepping"
    SAVING = "saving"
    STOPPING = "stopping"


class EffectKind(Enum):
    START = "start"  # create or reuse an actor and send RunTrial
    PROCEED = "proceed"  # ack a result batch (seq)
    SAVE = "save"  # ask the trial to commit a checkpoint (``save`` says why: reuse one of this iteration or not)
    STOP = "stop"  # end the trainable (save first if ``save``)
    RELEASE = "release"  # the trial's actor is free (``reusable``) or must exit
    COMPLETE = "complete"  # tell the scheduler: on_trial_complete
    ERROR = "error"  # tell the scheduler: on_trial_error
    REMOVE = "remove"  # tell the scheduler: on_trial_remove (stopped before running)
    HOLD = "hold"  # a PAUSE waits for the decisions on results in flight: the trial must not run past them
    CLONED = "cloned"  # a PBT exploit took effect: the trial's lineage goes on from another trial's checkpoint


@dataclass(frozen=True)
class Effect:
    kind: EffectKind
    trial_id: str
    seq: int = 0
    flag: bool = False
    save: SaveKind = SaveKind.PAUSE  # SAVE only: the kind of save the trial is asked for


__all__ = ["Effect", "EffectKind", "Phase"]
