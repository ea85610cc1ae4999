"""Driving ``ExperimentCore`` by hand in tests: a spec built by the driver's code, a fake store, and a
harness where the test plays the scheduler and the trials, event by event, with explicit times."""

from __future__ import annotations

import dataclasses
import itertools
from typing import Any

from actors._driver.config import RunConfig, TuneConfig
from actors._driver.tuner import Tuner
from actors._engine.core import SCHEDULER, ExperimentCore, ExperimentPhase
from actors._engine.lifecycle import TrialRecord, TrialTable
from actors._engine.reducer import Decision
from actors._engine.signals import Command, Send, Start
from actors._engine.spec import ExperimentSpec
from actors._engine.store import RestoreNotes, SearchProgress
from actors._engine.trial import TrialStatus
from actors.messages import (
    CheckpointRef,
    HookKind,
    SchedulerAction,
    SchedulerCall,
    SchedulerReady,
    SchedulerReply,
    TrialSummary,
)

_names = itertools.count()

# what FIFOScheduler implements (actors._engine.scheduler_host.overridden_hooks): the rest is answered locally
FIFO_HOOKS = frozenset({HookKind.CHOOSE, HookKind.SAVE})
ALL_HOOKS = frozenset(HookKind)


def _trainable(config: dict[str, Any]) -> None:
    pass


def make_spec(num_samples: int = 2, max_concurrent: int = 2, **over: Any) -> ExperimentSpec:
    """An ExperimentSpec built by the driver's own code (``Tuner._spec``, as ``fit()`` and ``simulate``
    do) over fresh ``memory://`` storage, with ``over`` replaced. ``max_concurrent`` is set as given
    (the driver caps it at this machine's CPUs), so the tests do not depend on the machine."""
    over.setdefault("max_concurrent", max_concurrent)
    # (not max_concurrent_trials: it would also cap the generator's live trials, as Ray's does)
    tuner = Tuner(_trainable, tune_config=TuneConfig(num_samples=num_samples, metric="loss", mode="min", seed=0),
                  run_config=RunConfig(system="simple", name="core", storage=f"memory://core-unit/{next(_names)}"))
    return dataclasses.replace(tuner._spec(), **over)


class FakeStore:
    """``actors._engine.store.ExperimentStore`` without storage: records what the core asked of it."""

    def __init__(self, spec: ExperimentSpec) -> None:
        self.spec = spec
        self.trial_prefix = "t"
        self.dirty = False
        self.due = False  # state_due's answer
        self.fenced: list[str] = []
        self.abandoned: list[str] = []  # abandon_unseen calls
        self.logged: list[tuple[str, tuple[dict[str, Any], ...]]] = []
        self.amended: list[tuple[str, dict[str, Any]]] = []  # amend_result calls (a callback's should_checkpoint)
        self.snapshots: list[int | None] = []  # the tag of each snapshot_table/freeze
        self.frozen = False
        self.saved: list[tuple[bytes, int | None]] = []
        self.closed = False
        self.lost = False  # scheduler_state_lost was called
        self.policy: list[tuple[str, str, str]] = []  # log_policy calls
        self.first_started: list[tuple[str, str | None]] = []  # on_first_start calls: (trial id, dirname)

    def restore_into(self, table: TrialTable, searcher: Any) -> SearchProgress:
        return SearchProgress()

    def take_restored(self) -> RestoreNotes:
        return RestoreNotes()

    def end_restored(self, rec: TrialRecord) -> None:
        pass

    def scheduler_state(self) -> bytes | None:
        return None

    def on_add(self, rec: TrialRecord) -> None:
        pass

    def on_first_start(self, rec: TrialRecord) -> None:
        self.first_started.append((rec.trial_id, rec.dirname))

    def on_start(self, rec: TrialRecord) -> None:
        pass

    def on_results(self, rec: TrialRecord, results: tuple[dict[str, Any], ...]) -> str | None:
        self.logged.append((rec.trial_id, results))
        return None

    def amend_result(self, rec: TrialRecord, result: dict[str, Any]) -> str | None:
        self.amended.append((rec.trial_id, result))
        return None

    def on_checkpoint(self, rec: TrialRecord, ckpt: CheckpointRef) -> None:
        pass

    def checkpoint_uri(self, ckpt: CheckpointRef) -> str:
        return f"memory://{ckpt.path}"

    def recover(self, rec: TrialRecord) -> None:
        return None

    def next_checkpoint_index(self, rec: TrialRecord) -> int:
        return 0

    def abandon_unseen(self, rec: TrialRecord) -> None:
        self.abandoned.append(rec.trial_id)

    def fence(self, trial_id: str) -> None:
        self.fenced.append(trial_id)

    def on_error(self, rec: TrialRecord, error: str, tb: str) -> None:
        pass

    def on_finished(self, rec: TrialRecord) -> None:
        pass

    def log_policy(self, trial_id: str, source_id: str, line: str) -> None:
        self.policy.append((trial_id, source_id, line))

    def state_due(self) -> bool:
        return self.due

    def freeze(self, table: TrialTable, searcher: Any, progress: SearchProgress, tag: int | None = None) -> None:
        if not self.frozen:
            self.snapshots.append(tag)
            self.frozen = True

    def snapshot_table(self, table: TrialTable, searcher: Any, progress: SearchProgress,
                       tag: int | None = None) -> None:
        if not self.frozen:
            self.snapshots.append(tag)

    def scheduler_saved(self, blob: bytes, tag: int | None = None) -> None:
        self.saved.append((blob, tag))

    def scheduler_state_lost(self) -> None:
        self.lost = True

    def close(self, final: bool) -> None:
        self.closed = True

    def summary(self, r: TrialRecord) -> TrialSummary:
        return TrialSummary(r.trial_id, r.config, r.status, r.last_result, r.checkpoint, r.error, r.num_failures,
                            f"memory://trials/{r.trial_id}", r.name, r.dirname)


class Harness:
    """One core; the test is the scheduler (``reply``/``answer_all``) and the trials (``handle``)."""

    def __init__(self, spec: ExperimentSpec, store: str = "fake") -> None:
        self.now = 0.0
        self.store: Any = None

        def open_store(s: ExperimentSpec) -> Any:
            if store == "fake":
                self.store = FakeStore(s)
            else:
                from actors._shell.experiment_io import ExperimentIO

                self.store = ExperimentIO(s, clock=lambda: self.now)
            return self.store

        self.core = ExperimentCore(spec, open_store)
        self.calls: dict[int, SchedulerCall] = {}  # sent and not answered yet
        self.phases = [self.core.phase]

    @property
    def phase(self) -> ExperimentPhase:
        return self.core.phase

    def handle(self, event: Any, at: float | None = None) -> list[Command]:
        """Hand the core one event at ``at`` (default: 0.1 s after the last one)."""
        self.now = self.now + 0.1 if at is None else at
        out = self.core.handle(event, self.now)
        for c in out:
            if isinstance(c, Send) and c.to == SCHEDULER and isinstance(c.msg, SchedulerCall):
                self.calls[c.msg.seq] = c.msg
        if self.core.phase is not self.phases[-1]:
            self.phases.append(self.core.phase)
        return out

    def open_calls(self, kind: HookKind | None = None) -> list[SchedulerCall]:
        return [c for _, c in sorted(self.calls.items()) if kind is None or c.kind is kind]

    def reply(self, seq: int, decision: Decision = Decision.CONTINUE, actions: tuple[SchedulerAction, ...] = (),
              chosen: str | None = None, state: bytes | None = None, at: float | None = None) -> list[Command]:
        call = self.calls.pop(seq)
        return self.handle(SchedulerReply(seq, call.kind, call.trial_id, decision, actions, chosen, state), at)

    def answer_all(self) -> list[Command]:
        """Answer every open call in call order as a FIFO scheduler would (it may cause more calls)."""
        out: list[Command] = []
        while self.calls:
            call = self.calls[min(self.calls)]
            chosen = None
            if call.kind is HookKind.CHOOSE:
                waiting = self.core.table.with_status(TrialStatus.PENDING, TrialStatus.PAUSED)
                chosen = waiting[0].trial_id if waiting else None
            out += self.reply(call.seq, chosen=chosen, state=b"sched-state" if call.kind is HookKind.SAVE else None)
        return out

    def ready(self, hooks: frozenset[HookKind] = FIFO_HOOKS, batching: bool = False) -> list[Command]:
        return self.handle(SchedulerReady(batching, "FIFOScheduler", hooks))


def sent(commands: list[Command], kind: type, to: int | None = None) -> list[Any]:
    """The messages of type ``kind`` among the ``Send`` commands (to ``to``, if given)."""
    return [c.msg for c in commands if isinstance(c, Send) and isinstance(c.msg, kind) and (to is None or c.to == to)]


def of_type(commands: list[Command], kind: type) -> list[Any]:
    return [c for c in commands if isinstance(c, kind)]



def first_chosen(h: Harness) -> str:
    """Answer the plugin's open CHOOSE with the first trial drawn (started now); that trial's id."""
    [choose] = h.open_calls(HookKind.CHOOSE)
    first = next(iter(h.core.table.trials))
    h.reply(choose.seq, chosen=first)
    return first


def second_choice_out() -> tuple[Harness, str, SchedulerCall]:
    """Two trials, room for both: the first chosen and started, the question for the second still out."""
    h = Harness(make_spec(num_samples=2, max_concurrent=2))
    h.handle(Start(), at=0.0)
    h.ready(FIFO_HOOKS)
    first = first_chosen(h)
    [again] = h.open_calls(HookKind.CHOOSE)
    return h, first, again


__all__ = ["ALL_HOOKS", "FIFO_HOOKS", "FakeStore", "Harness", "first_chosen", "make_spec", "of_type",
           "second_choice_out", "sent"]
