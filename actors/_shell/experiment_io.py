"""The controller's storage side: params, result logs, errors, retention, state, PBT's policy log.

Kept out of the actor class so the controller reads as message handling only. Histories go to storage as
they arrive; the controller keeps just the last result per trial, so its memory does not grow with runs.
What a state holds and how it is encoded is ``experiment_state``; reading one back, ``experiment_restore``.
"""

from __future__ import annotations

import logging
import secrets
import time
from collections.abc import Callable
from typing import Any

import cloudpickle

from actors._engine.lifecycle import TrialRecord, TrialTable
from actors._engine.spec import ExperimentSpec
from actors._engine.store import RestoreNotes, SearchProgress
from actors._engine.trial import TrialStatus
from actors._shell.experiment_restore import restore_table
from actors._shell.experiment_state import STATE_VERSION, TRIAL_DIRS_NAMED, SavedStates, b64, trial_row
from actors._shell.heap import release_free_heap
from actors._shell.logger_host import ControllerLoggers, LoggerFailed
from actors._shell.recovery import Recovery, choose, found_from
from actors._shell.retention import Retention
from actors._state_codec import PICKLED, pickled
from actors.messages import CheckpointRef, TrialSummary
from storage import (
    ExperimentLayout,
    StateWriter,
    StorageContext,
    StorageError,
    committed_after,
    delete_checkpoint,
    dumps_result,
    key_sorted,
    log_pbt_exploit,
    read_results,
    write_bytes,
    write_text,
)

log = logging.getLogger("audition")
# A state write, periodic or requested by a pause, stop or completion, waits at least this many times the
# cost of the last write, so large experiments spend a bounded share of the controller on it.
STATE_COST_FACTOR = 20.0
# ... but no longer than this: one write slowed by a storage stall (retried for 30 s, say) must not hold
# the next one back for ten minutes, the window a crash of the whole machine could lose.
MAX_STATE_SPACING_S = 60.0
# A state of this many trials or more was large enough to give its passing memory back (``_shell/heap``).
TRIM_AFTER_ROWS = 256
# How far a trial's checkpoint numbering jumps when its member is lost (see ExperimentIO.fence).
FENCE_INDEX_GAP = 1024


class ExperimentIO:
    def __init__(self, spec: ExperimentSpec, clock: Callable[[], float] = time.monotonic,
                 cost_clock: Callable[[], float] = time.perf_counter) -> None:
        self.spec = spec
        self.clock = clock
        # measures what a state write costs (it spaces the writes): the simulator passes a
        # deterministic one, so the real cost of a write never changes a simulated run
        self.cost_clock = cost_clock
        self.ctx = StorageContext(spec.storage_url, spec.storage_options)
        self.layout = ExperimentLayout(self.ctx, spec.name)
        self.state_writer = StateWriter(self.ctx, self.layout)
        # result.json, progress.csv and any other in_controller logger: written as results arrive
        self.loggers = ControllerLoggers(spec.loggers, self.ctx, self.layout)
        self.logged_iter: dict[str, int] = {}
        self.retention = Retention(spec, self.ctx)  # which checkpoints may be deleted, and when
        self.max_index: dict[str, int] = {}
        self.notes = RestoreNotes()  # what the restore did that the searcher and scheduler must hear of
        # a restored run keeps the prefix, so re-suggested trials get their old ids back
        restored = spec.restore_state or {}
        self.trial_prefix: str = restored.get("trial_prefix") or secrets.token_hex(3)[:5]
        # directories of trials a restore replaced with new ones (restarted): kept, though in no row
        self.kept_dirs: list[str] = list(restored.get("kept_dirs") or [])
        self.sched_blob: bytes | None = None
        self.state_stored = bool(spec.restore_state)  # storage holds a state of this experiment (its table and
        # scheduler state matched): the restored one, or one this run wrote
        self.pending_table: dict[str, Any] | None = None
        self.pending_tag: int | None = None  # the SchedulerCall(SAVE) whose answer completes it
        self.last_state = -1e9
        self.frozen = False
        self.dirty = False  # a trial paused, stopped or finished since the last snapshot
        self.write_cost = 0.0  # seconds the last snapshot + write took
        # per (trial, "config"/"last_result"): the values JSON cannot hold all of, and their pickled text
        self._exact: dict[tuple[str, str], tuple[dict[str, Any], str]] = {}
        self.saved_states = SavedStates()  # the searcher's and stopper's, encoded
        self.table: TrialTable | None = None

    # ------------------------------------------------------------------ restore
    def restore_into(self, table: TrialTable, searcher: Any) -> SearchProgress:
        """Load a saved trial table (Tuner.restore); returns how far the search had gone.

        Always called once at start: it also hands this object the live table, whose
        checkpoints retention must never delete.
        """
        self.table = self.retention.table = table
        if not self.spec.restore_state:
            return SearchProgress()
        got = restore_table(self.spec.restore_state, self.ctx, self.layout, table, searcher, self.spec.stopper,
                            self.spec.num_to_keep)
        self.sched_blob = got.scheduler
        self.logged_iter.update(got.logged_iter)
        self.max_index.update(got.max_index)
        self.retention.restored(got.ckpts, got.state_refs)
        self.notes = got.notes
        return SearchProgress(got.suggested, got.search_closed)

    def take_restored(self) -> RestoreNotes:
        notes, self.notes = self.notes, RestoreNotes()
        return notes

    def end_restored(self, rec: TrialRecord) -> None:
        """A restored trial ends before running again: its last row says ``done``, as a stopped one's."""
        from actors._shell.restore_storage import mark_last_done

        mark_last_done(self.ctx, self.layout, rec.trial_id)

    def scheduler_state(self) -> bytes | None:
        return self.sched_blob

    # ------------------------------------------------------------------ trial events
    def on_add(self, rec: TrialRecord) -> None:
        self.layout.set_dirname(rec.trial_id, rec.dirname)

    def on_first_start(self, rec: TrialRecord) -> None:
        """As Ray's JSON logger at a trial's start: ``params.json``, and ``result.json`` created empty
        (a trial that never reports has one)."""
        self.layout.set_dirname(rec.trial_id, rec.dirname)
        self.write_params(rec)
        write_bytes(self.ctx, self.layout.result_file(rec.trial_id), b"", what="creating result.json")

    def write_params(self, rec: TrialRecord) -> None:
        """The trial's ``params.json`` (the simulator's store encodes it when it is first read), and
        ``params.pkl``, the config cloudpickled, as Ray's: it keeps what JSON cannot (tuples, sets)."""
        params = dumps_result(key_sorted(rec.config), indent=2)  # Ray's sort_keys; a set as its str, as Ray's
        write_bytes(self.ctx, self.layout.params_file(rec.trial_id), params.encode("utf-8"), what="writing JSON")
        write_bytes(self.ctx, self.layout.params_pickle_file(rec.trial_id), cloudpickle.dumps(rec.config),
                    what="writing params.pkl")

    def on_start(self, rec: TrialRecord) -> None:
        """A (re)start from ``rec.checkpoint``: drop logged iterations after it (a PBT clone's are kept,
        as Ray keeps them: its rows from its source's checkpoint on are appended)."""
        logged = self.logged_iter.get(rec.trial_id, 0)
        rewind = rec.iteration if logged > rec.iteration and not rec.cloned else None
        self.loggers.start(rec.snapshot(), rewind)
        if rewind is not None or rec.cloned:
            # (a clone's lineage starts at its source's checkpoint with no row logged: what a dead clone
            # committed is recovered from there, and a retry that rewinds none of its rows rewinds nothing)
            self.logged_iter[rec.trial_id] = rec.iteration
        if rec.clone is None and rec.extra_result.get("pbt_exploit"):
            self.write_params(rec)

    def on_results(self, rec: TrialRecord, results: tuple[dict[str, Any], ...]) -> str | None:
        """Append a batch to the trial's history; an error message if a logger failed. (Its metrics were
        checked when it arrived: ``actors._engine.verdicts``.)"""
        try:
            self.loggers.results(rec.snapshot(), list(results))
        except LoggerFailed as exc:
            return f"{exc}; what was written before is kept"
        self.logged_iter[rec.trial_id] = int(results[-1].get("training_iteration", 0))
        return None

    def amend_result(self, rec: TrialRecord, result: dict[str, Any]) -> str | None:
        try:
            self.loggers.amend(rec.snapshot(), result)
        except LoggerFailed as exc:
            return f"{exc}; what was written before is kept"
        return None

    def on_checkpoint(self, rec: TrialRecord, ckpt: CheckpointRef) -> None:
        self.max_index[rec.trial_id] = max(self.max_index.get(rec.trial_id, -1), ckpt.index)
        self.retention.on_checkpoint(rec, ckpt)

    def recover(self, rec: TrialRecord) -> Recovery | None:
        """After a failed run: the checkpoints it committed that the controller never heard of (its process
        died first; ``actors._shell.recovery``). The trial resumes from the newest one the history reaches,
        whose missing results are logged now; those past a gap are deleted. None if storage holds nothing newer."""
        known = self.max_index.get(rec.trial_id, -1)
        try:
            infos = committed_after(self.ctx, self.layout.trial_dir(rec.trial_id), known)
            history = self._lineage(rec) if infos else []
        except StorageError as exc:  # the retry still has the checkpoint the controller knows
            log.warning("trial %s: could not look for checkpoints newer than the known one: %s", rec.trial_id, exc)
            return None
        if not infos:
            return None
        got = choose([found_from(i) for i in infos], self.logged_iter.get(rec.trial_id, 0), history)
        for c in got.unusable:  # a gap in the history before it: the results are gone
            delete_checkpoint(self.ctx, c.path)
        self.max_index[rec.trial_id] = max(known, infos[-1].index)
        if got.rows:
            self.loggers.results(rec.snapshot(), got.rows)
            self.logged_iter[rec.trial_id] = int(got.rows[-1]["training_iteration"])
            rec.last_result = dict(got.rows[-1])
        if got.checkpoint is not None:
            rec.checkpoint = got.checkpoint
            if self.table is not None:
                self.table.changed.add(rec.trial_id)  # the scheduler's mirror shows the new checkpoint
        return got

    def abandon_unseen(self, rec: TrialRecord) -> None:
        """A PBT exploit took effect: the trial goes on from its clone source's checkpoint, so what its runs
        committed unseen (a pause's save whose notice never came) is of the lineage it leaves. Deleted, and
        later checkpoints are numbered past it: a retry's recovery resumed from it, with the clone's config
        and the old lineage's rows logged again (a duplicate row, seen in a simulation)."""
        known = self.max_index.get(rec.trial_id, -1)
        try:
            infos = committed_after(self.ctx, self.layout.trial_dir(rec.trial_id), known)
            for info in infos:
                delete_checkpoint(self.ctx, info.path)
        except StorageError as exc:  # then numbered past whatever may be there, which recovery never looks at
            log.warning("trial %s: could not delete the checkpoints of the run its exploit replaced: %s",
                        rec.trial_id, exc)
            self.fence(rec.trial_id)
            return
        if infos:
            self.max_index[rec.trial_id] = max(known, infos[-1].index)

    def _lineage(self, rec: TrialRecord) -> list[dict[str, Any]]:
        """The logged rows of the trial's last lineage, read back from storage (only when a checkpoint the
        controller never heard of is found: rare), against which that checkpoint's rows are checked."""
        from actors._engine.marks import MarkKind
        from actors._shell.restore_storage import lineage_reach

        self.loggers.flush()
        rows = read_results(self.ctx, self.layout, rec.trial_id)
        return lineage_reach(rows, cloned=any(m.kind is MarkKind.EXPLOIT for m in rec.marks))[1]

    def next_checkpoint_index(self, rec: TrialRecord) -> int:
        return self.max_index.get(rec.trial_id, -1) + 1

    def fence(self, trial_id: str) -> None:
        """The run of ``trial_id`` is on an unreachable member, which may still be running it.

        Cut off, it can go on committing checkpoints to shared storage until its result window
        fills (``batch_window`` results, then it blocks for an acknowledgement that never comes).
        Numbering the next run's checkpoints past all of those means the two runs never write the
        same ``checkpoint_NNNNNN``; the stale run's few extra checkpoints are never named by the
        state and are only ever garbage.
        """
        gap = max(FENCE_INDEX_GAP, 2 * self.spec.batch_window + 2)
        self.max_index[trial_id] = self.max_index.get(trial_id, -1) + gap

    def on_error(self, rec: TrialRecord, error: str, tb: str) -> None:
        write_text(self.ctx, self.layout.error_file(rec.trial_id), f"{error}\n\n{tb}")

    def on_finished(self, rec: TrialRecord) -> None:
        self.loggers.end(rec.snapshot(), failed=rec.status is TrialStatus.ERROR)
        self.retention.forget(rec.trial_id)

    # ------------------------------------------------------------------ experiment state
    def state_due(self) -> bool:
        """Every ``state_interval_s``, or sooner once a trial paused, stopped or finished; never sooner than
        ``STATE_COST_FACTOR`` times the last write's cost (at most ``MAX_STATE_SPACING_S``), so writes take at
        most 1/20 of the controller's time (Ray Tune's rule: at least 95% for results and scheduling) while a
        write takes up to 3 s."""
        if self.pending_table is not None:
            return False
        since = self.clock() - self.last_state
        spacing = min(STATE_COST_FACTOR * self.write_cost, MAX_STATE_SPACING_S)
        return since >= spacing and (self.dirty or since >= self.spec.state_interval_s)

    def freeze(self, table: TrialTable, searcher: Any, progress: SearchProgress, tag: int | None = None) -> None:
        """Snapshot before an abort ends every trial, and keep that snapshot for the final write.

        An aborted run (Ctrl-C, a dead driver, a scheduler bug) must stay resumable: its
        unfinished trials are saved as they were, not as the TERMINATED the abort makes them.
        """
        if not self.frozen:
            self.snapshot_table(table, searcher, progress, tag)
            self.frozen = True

    def snapshot_table(self, table: TrialTable, searcher: Any, progress: SearchProgress,
                       tag: int | None = None) -> None:
        """Capture the table now; written once the scheduler's state asked for at the same moment
        (the ``SchedulerCall`` numbered ``tag``) arrives, so the two always match on restore."""
        if self.frozen:
            return
        started = self.cost_clock()
        # what may fail first (the user's save() methods, pickling): a failed snapshot changes nothing here
        searcher_state = self.saved_states.searcher(searcher)
        stopper_state = self.saved_states.stopper(self.spec.stopper)
        self.dirty = False
        self.table = table
        self.pending_tag = tag
        rows = [self._row(r) for r in table.trials.values()]
        self.retention.snapshot({r["checkpoint"]["path"] for r in rows if r["checkpoint"]})
        self.pending_table = {
            "version": STATE_VERSION,
            "name": self.spec.name,
            # plain JSON for readers that never unpickle tuner.pkl (audition dashboard, status)
            "metric": self.spec.metric, "mode": self.spec.mode,
            "trial_prefix": self.trial_prefix,
            # rows name their directory once started (as Ray); absent (older states): the trial id's
            "trial_dirs": TRIAL_DIRS_NAMED,
            "suggested": progress.suggested,
            "search_closed": progress.closed,  # absent (older states): False
            # cloudpickle: saved searcher state may hold the user's sample_from functions
            "searcher": searcher_state,
            "stopper": stopper_state,
            "trials": rows,
            "written_at": time.time(),
        }
        if self.kept_dirs:
            self.pending_table["kept_dirs"] = self.kept_dirs
        self.last_state = self.clock()
        self.write_cost = self.cost_clock() - started

    def scheduler_saved(self, blob: bytes, tag: int | None = None) -> None:
        """The scheduler's state as of call ``tag``; completes the snapshot taken with that call.

        An answer to an older call (a periodic save overtaken by an abort's freeze) is newer than
        what we had, so it is kept for the final write, but it never completes a later snapshot.
        """
        self.sched_blob = blob
        if tag == self.pending_tag:
            self._write_state()

    def scheduler_state_lost(self) -> None:
        """The scheduler's state as of the snapshot taken last will not come (an abort that waited for it in
        vain, a dead scheduler, a failed write). That snapshot is not written beside an older scheduler state: a
        restore would give the scheduler a table it never heard of (seen: synchronous PBT waiting for ever for a
        trial the table had TERMINATED). The state stored last is kept, its table and scheduler state matched;
        without one the snapshot is written with no scheduler state, and a restore starts the scheduler afresh
        (as Ray's restore always does)."""
        if self.state_stored:
            self.pending_table = None
        else:
            self.sched_blob = None

    def _write_state(self) -> None:
        if self.pending_table is None:
            return
        state = dict(self.pending_table, scheduler=b64(self.sched_blob), retired=self.retention.retired())
        self.pending_table = None
        started = self.cost_clock()  # (the histories' rewrites are part of the cost that spaces state writes)
        self.loggers.flush()  # rows first: a state never names results that are not in storage
        self.state_writer.write(state)
        self.state_stored = True
        self.write_cost += self.cost_clock() - started
        if len(state["trials"]) >= TRIM_AFTER_ROWS:  # (the write's text and bytes are freed by now)
            release_free_heap()
        self.retention.state_written()

    def _row(self, r: TrialRecord) -> dict[str, Any]:
        row = trial_row(r, self.logged_iter.get(r.trial_id, 0), self.max_index.get(r.trial_id, -1))
        for key in PICKLED:  # ("config", "last_result": the record's attributes of those names)
            exact = self._exact_text(r.trial_id, key, getattr(r, key))
            if exact is not None:
                row[f"{key}_pickled"] = exact
        return row

    def _exact_text(self, trial_id: str, key: str, values: dict[str, Any]) -> str | None:
        """``actors._state_codec.pickled(values)``, kept per trial while the same object (the engine replaces
        a trial's config and last result, never changes them): a row whose values JSON holds is walked each
        write (~4 us) and keeps nothing; one holding a ``float32`` loss is pickled once per result, not per write."""
        cached = self._exact.get((trial_id, key))
        if cached is not None and cached[0] is values:
            return cached[1]
        text = pickled(values)
        if text is None:
            self._exact.pop((trial_id, key), None)
        else:
            self._exact[(trial_id, key)] = (values, text)
        return text

    def close(self, final: bool) -> None:
        self.loggers.close()
        self._write_state()

    def log_policy(self, trial_id: str, source_id: str, line: str) -> None:
        log_pbt_exploit(self.ctx, self.layout.experiment_dir, trial_id, source_id, line)

    def checkpoint_uri(self, ckpt: CheckpointRef) -> str:
        return self.ctx.uri(ckpt.path)

    def summary(self, r: TrialRecord) -> TrialSummary:
        err = None
        if r.status is TrialStatus.ERROR:
            err = f"{r.error}\n{r.traceback or ''}"
        # a trial that never ran (still PENDING at the end) has its id alone, as Ray's Result.metrics
        last = r.last_result or {"trial_id": r.trial_id}
        return TrialSummary(r.trial_id, r.config, r.status, last, r.checkpoint, err, r.num_failures,
                            self.ctx.uri(self.layout.trial_dir(r.trial_id)), r.name, r.dirname, r.tag,
                            dirname_custom=r.dirname_custom, resources=r.resources or self.spec.resources_per_trial)


__all__ = ["STATE_VERSION", "ExperimentIO"]
