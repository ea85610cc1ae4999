"""Which of a run's checkpoints may be deleted, and when: ``CheckpointConfig(num_to_keep)`` as Ray keeps them,
deferred while a saved (or about to be saved) experiment state or a live trial still names the checkpoint."""

from __future__ import annotations

from collections.abc import Iterable

from actors._engine.lifecycle import TrialRecord, TrialTable
from actors._engine.spec import ExperimentSpec
from actors.messages import CheckpointRef
from storage import StorageContext, delete_checkpoint, ray_survivors


class Retention:
    """The kept checkpoints of each trial, and those retired but not deleted yet.

    A restore resumes from the checkpoint the last written state names, and a PBT clone from another
    trial's checkpoint: deleting either would break that resume, so a retired checkpoint waits until
    neither the written state, the state being written nor a trial names it.
    """

    def __init__(self, spec: ExperimentSpec, ctx: StorageContext) -> None:
        self.spec = spec
        self.ctx = ctx
        self.table: TrialTable | None = None  # the live table (set once the experiment starts)
        self.ckpts: dict[str, list[CheckpointRef]] = {}  # per trial: the checkpoints kept
        self.deferred: list[CheckpointRef] = []  # retired, waiting until nothing names them
        self.state_refs: set[str] = set()  # named by the state written last
        self.pending_refs: set[str] = set()  # named by the state about to be written

    def restored(self, ckpts: dict[str, list[CheckpointRef]], state_refs: Iterable[str]) -> None:
        """What a restored state kept, and the checkpoints it names."""
        self.ckpts.update(ckpts)
        self.state_refs |= set(state_refs)

    def on_checkpoint(self, rec: TrialRecord, ckpt: CheckpointRef) -> None:
        """A new checkpoint of ``rec``: keep the ones Ray keeps (ties: the newer; no score attribute in the
        result: as if the best; a score that is not a number: never registered, so never deleted), and
        always the latest and the one a pause or retry resumes from."""
        keep = self.spec.num_to_keep
        if keep is None:
            return
        kept = [c for c in self.ckpts.get(rec.trial_id, []) if c.path != ckpt.path] + [ckpt]
        best = ray_survivors([(c, c.metrics) for c in kept], self.spec.checkpoint_score_attribute,
                             self.spec.checkpoint_score_order, keep)
        survivors = {c.path for c in best} | {ckpt.path}
        if rec.checkpoint is not None:
            survivors.add(rec.checkpoint.path)
        self.ckpts[rec.trial_id] = [c for c in kept if c.path in survivors]
        self.deferred += [c for c in kept if c.path not in survivors]
        self.delete_unreferenced()

    def forget(self, trial_id: str) -> None:
        """The trial ended: nothing of it is retired any more."""
        self.ckpts.pop(trial_id, None)

    def snapshot(self, refs: set[str]) -> None:
        """A state naming ``refs`` is about to be written."""
        self.pending_refs = refs

    def retired(self) -> list[str]:
        """The checkpoints deleted right after the pending state is written (the state lists them, so a
        restore finishes a deletion cut short)."""
        keep = self.pending_refs | self.live_refs()
        return sorted({c.path for c in self.deferred if c.path not in keep})

    def state_written(self) -> None:
        """The pending state is in storage: it is what a restore resumes from now."""
        self.state_refs, self.pending_refs = self.pending_refs, set()
        if self.deferred:
            self.delete_unreferenced()

    def delete_unreferenced(self) -> None:
        refs = self.state_refs | self.pending_refs | self.live_refs()
        waiting = []
        for c in self.deferred:
            if c.path in refs:
                waiting.append(c)
            else:
                delete_checkpoint(self.ctx, c.path)
        self.deferred = waiting

    def live_refs(self) -> set[str]:
        if self.table is None:
            return set()
        return {c.path for r in self.table.trials.values() for c in (r.checkpoint, r.exploit_checkpoint)
                if c is not None}


__all__ = ["Retention"]
