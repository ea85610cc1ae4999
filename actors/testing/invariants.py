"""Invariants every simulated experiment must keep, whatever the interleaving and the faults.

``violations(sim)`` reads a finished ``Simulation`` back (its grid, its histories from storage, its
checkpoints' manifests, the core's trial table) and lists what is wrong, one readable line each;
``restore_violations`` continues an aborted simulation with ``Tuner.restore`` semantics and checks
that it finishes. The engine's own seeded tests run them after thousands of simulations; a user can
run them after simulating an experiment with their own scheduler plugin::

    sim = simulate(curve, space, TuneConfig(..., scheduler=MyScheduler()), max_iterations=10, seed=s)
    assert not violations(sim, num_samples=8), violations(sim, num_samples=8)

What is checked, per trial (``violations``):

* the experiment ended (``Simulation.hung`` is False) and, when it was not aborted, every trial is
  TERMINATED or ERROR and there are ``num_samples`` of them;
* its history (``metrics_history``, what storage keeps) is contiguous: ``training_iteration`` runs
  1, 2, ..., n with no gap and no duplicate, and each run's rows are consecutive, counting
  ``iterations_since_restore`` from 1 (a retried trial's rows are the ones storage kept after the
  retry rewound to its checkpoint); a PBT clone restores its source's checkpoint, so its count goes
  on from that checkpoint's iteration, as in Ray 2.60 (its earlier rows stay): each such lineage is
  contiguous, and the checks below read the last one;
* each row's ``time_total_s`` is the row before it plus its ``time_this_iter_s`` (0 before iteration 1; not
  checked for a PBT clone, whose time goes on from its source's), and ``time_since_restore`` likewise within
  a run: a restarted run counts on from its checkpoint;
* nothing is lost: its last committed checkpoint's iteration is in the history, and the rows that
  checkpoint's manifest carries (reported but not yet acknowledged when it was committed) are the
  history's rows at those iterations; its last result is the history's last row;
* a TERMINATED trial of a run that was not aborted got to its end: its last row says ``done`` (its
  trainable finished, or a stop was decided on that result), or a STOP mark says it was stopped
  while computing.

And per experiment: the core never asked the scheduler which trial to start again with nothing new since
the last question (no event that may change the answer, no trial started), a loop that keeps the
controller and the scheduler actor busy in a real run (``SimWorld.choices``).
"""

from __future__ import annotations

import itertools
import math
from typing import Any

from actors._engine.marks import MarkKind
from actors._engine.trial import TrialStatus

# a run restarted from a checkpoint rewinds its history, and its last result only when it reports
# (a restore rewinds both since 2026-12-04): the violation's text starts with it
STALE_LAST_RESULT = "stale last result"
# the keys that identify which run produced a row (the metrics of a curve repeat across runs)
_RUN_KEYS = ("training_iteration", "iterations_since_restore", "time_total_s")


def violations(sim: Any, *, num_samples: int | None = None, may_abort: bool = True) -> list[str]:
    """What is wrong with a finished simulation (see the module docstring); [] if nothing.

    ``num_samples``: the number of trials a run that was not aborted must end with.
    ``may_abort``: False when nothing in the faults may end the experiment early (then an error is
    itself a violation).
    """
    if sim.hung:
        return [f"the experiment hung: {sim.hang_reason}"]
    if sim.results is None or sim.finished is None:
        return ["the experiment ended without reporting its results"]
    out: list[str] = []
    aborted = sim.error is not None
    if aborted and not may_abort:
        out.append(f"the experiment was aborted although no fault may abort it: {sim.error.splitlines()[0]}")
    if not aborted and num_samples is not None and len(sim.results) != num_samples:
        out.append(f"{len(sim.results)} trials at the end, expected {num_samples}")
    choices = getattr(sim.world, "choices", None)
    if choices is not None and choices.repeated:
        out.append(f"the core asked the scheduler which trial to start {choices.repeated} time(s) again with nothing "
                   f"new since it declined ({choices.chooses} questions in all): a busy loop in a real run")
    table = getattr(getattr(sim.world, "core", None), "table", None)
    for result, summary in zip(sim.results, sim.finished.trials, strict=True):
        rec = table.trials.get(result.trial_id) if table is not None else None
        out += [f"trial {result.trial_id}: {v}" for v in _trial(result, summary, rec, aborted, sim)]
    return out


def _trial(result: Any, summary: Any, rec: Any, aborted: bool, sim: Any) -> list[str]:
    out: list[str] = []
    if not aborted and not result.status.is_finished:
        out.append(f"ended {result.status.value}, not TERMINATED or ERROR")
    full = result.metrics_history
    its = [int(h.get("training_iteration", -1)) for h in full]
    # each exploit may start one new lineage (a clone's rows go on from its source's checkpoint); its
    # first row says pbt_exploit unless a retry redid it (the row past the checkpoint is rewound)
    clones = max(sum(1 for m in rec.marks if m.kind is MarkKind.EXPLOIT) if rec is not None else 0,
                 sum(1 for h in full if "pbt_exploit" in h))
    cloned = clones > 0
    starts = _lineages(its)
    if its and (its[0] != 1 or len(starts) - 1 > clones):
        out.append(f"history not contiguous from 1 (a PBT clone's from its source's checkpoint): "
                   f"training_iteration {its}")
        return out  # the rest reads rows by iteration
    for prev, row in itertools.pairwise(full):
        n, p = row.get("iterations_since_restore"), prev.get("iterations_since_restore")
        if n != 1 and (not isinstance(p, int) or n != p + 1):
            out.append(f"row {row['training_iteration']}: iterations_since_restore {n} after {p} (a run's rows "
                       "are not consecutive: rows of two runs mixed)")
            break
    out += _times(full, starts, cloned)
    if _storage_failed(sim):
        return out  # what storage refused is missing; the restore of the aborted run is what must hold
    # the last lineage, padded so that history[i - 1] is its row at iteration i (or None, before it)
    base = its[starts[-1]] - 1 if starts[-1] else 0
    history: list[Any] = [None] * base + full[starts[-1]:]
    last = int(result.metrics.get("training_iteration", 0) or 0)
    if last > len(history) and rec is not None and rec.iteration == len(history):
        out.append(f"{STALE_LAST_RESULT}: last result is iteration {last} but the history ends at {len(history)}, "
                   "where its last run restarted from a checkpoint (the restart rewound the history, not the "
                   "last result, and the run reported nothing)")
    elif last != len(history):
        out.append(f"last result is iteration {last} but the history ends at {len(history)}")
    elif full and _key(result.metrics) != _key(history[-1]):
        out.append(f"last result {_key(result.metrics)} is not the history's last row {_key(history[-1])}")
    ckpt = summary.checkpoint
    if ckpt is not None and cloned and result.path and not ckpt.path.startswith(result.path.rstrip("/") + "/"):
        pass  # the source's checkpoint a clone restarts from (it may have ended before reporting)
    elif ckpt is not None:
        if ckpt.iteration > len(history):
            out.append(f"lost results: its checkpoint is at iteration {ckpt.iteration} but the history ends at "
                       f"{len(history)}")
        else:
            out += _manifest_rows(sim, summary, history)
    if not aborted and result.status is TrialStatus.TERMINATED and full and not history[-1].get("done"):
        stopped = rec is not None and any(m.kind is MarkKind.STOP for m in rec.marks)
        if not stopped:
            out.append(f"TERMINATED at iteration {len(history)} without a done row or a STOP mark (its "
                       "last results were dropped?)")
    return out


def _times(full: list[dict[str, Any]], starts: list[int], cloned: bool) -> list[str]:
    """Each row's ``time_total_s`` is the row before it plus its own ``time_this_iter_s`` (a run counts on from the
    checkpoint it restored, as Ray's ``Trainable.restore``, from 0 without one), and ``time_since_restore`` restarts
    with each run. Of a PBT clone only the latter: its time goes on from its source's checkpoint, whose iteration
    may follow its own last one (no lineage start shows) and whose time is not in its history."""
    first = set(starts)
    for i, row in enumerate(full):
        values = [row.get("time_this_iter_s"), row.get("time_total_s"), row.get("time_since_restore")]
        numbers = [float(v) for v in values if isinstance(v, (int, float))]
        if len(numbers) != 3:
            continue
        d, total, since = numbers
        if cloned:
            before = None
        elif i in first:
            before = 0.0 if row.get("training_iteration") == 1 else None
        else:
            before = full[i - 1].get("time_total_s")
        if isinstance(before, (int, float)) and not math.isclose(total, before + d, abs_tol=1e-6):
            return [f"row {row.get('training_iteration')}: time_total_s {total} is not {before} (the row before it, or "
                    f"0 at iteration 1) plus time_this_iter_s {d}: a run did not count on from where it restarted"]
        n = row.get("iterations_since_restore")
        before_run = 0.0 if n == 1 else full[i - 1].get("time_since_restore") if i else None
        if isinstance(before_run, (int, float)) and not math.isclose(since, before_run + d, abs_tol=1e-6):
            return [f"row {row.get('training_iteration')}: time_since_restore {since} is not {before_run} plus "
                    f"time_this_iter_s {d}"]
    return []


def _lineages(its: list[int]) -> list[int]:
    """Where each contiguous run of a history starts: 0, then each row whose iteration does not follow
    the one before (a PBT clone's first row, or else a gap or a duplicate)."""
    return [0, *(i for i in range(1, len(its)) if its[i] != its[i - 1] + 1)]


def _storage_failed(sim: Any) -> bool:
    return bool(getattr(getattr(sim.world.core, "store", None), "failures", None))


def _key(row: dict[str, Any]) -> tuple[Any, ...]:
    return tuple(row.get(k) for k in _RUN_KEYS)


def _manifest_rows(sim: Any, summary: Any, history: list[dict[str, Any]]) -> list[str]:
    """The rows carried by the trial's last checkpoint are the ones its history holds."""
    from storage import StorageContext, StorageError, read_manifest

    ctx = StorageContext(sim.storage_url)
    try:
        rows = (read_manifest(ctx, summary.checkpoint.path).get("metadata") or {}).get("results") or []
    except StorageError as exc:
        return [f"its checkpoint {summary.checkpoint.path} cannot be read: {exc}"]
    out = []
    for row in rows:
        if row.get("trial_id") != summary.trial_id:
            continue  # a checkpoint cloned from another trial (PBT): its rows are that trial's
        i = int(row["training_iteration"])
        if i <= len(history) and history[i - 1] is None:
            continue  # before the last clone's lineage (that lineage's rows are its source's)
        if i > len(history) or _key(history[i - 1]) != _key(row):
            got = _key(history[i - 1]) if i <= len(history) else None
            out.append(f"checkpoint {summary.checkpoint.path} carries row {_key(row)}, the history has {got}")
    return out


def saved_trials(sim: Any) -> dict[str, tuple[int, list[dict[str, Any]]]]:
    """Per trial of the experiment's saved state: the checkpoint iteration a restore resumes from,
    and the history storage holds now (read before a restore rewrites it)."""
    return {tid: (ck, history) for tid, (_, ck, _, history) in _saved_rows(sim).items()}


def _saved_rows(sim: Any) -> dict[str, tuple[TrialStatus, int, int, list[dict[str, Any]]]]:
    """Per trial of the saved state: its status, checkpoint iteration, the iteration its rows were
    logged to when the state was written, and the history storage holds now."""
    from storage import ExperimentLayout, StorageContext, read_experiment_state, read_results

    ctx = StorageContext(sim.storage_url)
    layout = ExperimentLayout(ctx, sim.name)
    out: dict[str, tuple[TrialStatus, int, int, list[dict[str, Any]]]] = {}
    for row in (read_experiment_state(ctx, layout) or {}).get("trials", []):
        trial_id = row["trial_id"]
        layout.set_dirname(trial_id, row.get("dirname"))
        out[trial_id] = (TrialStatus(row["status"]), int((row.get("checkpoint") or {}).get("iteration", 0)),
                         int(row.get("logged_iteration") or 0), read_results(ctx, layout, trial_id))
    return out


def _last_lineage_upto(rows: list[dict[str, Any]], iteration: int) -> int:
    """How many of ``rows`` reach ``iteration`` in their last lineage (a PBT clone's rows follow its own)."""
    at = [i for i, h in enumerate(rows) if int(h.get("training_iteration", 0)) == iteration]
    return at[-1] + 1 if at else min(iteration, len(rows))


RESTORE_MIN_DELIVERIES = 20_000  # the least a restored run may take (its cap: 20x its first run's deliveries)


def restore_violations(sim: Any, curve: Any, *, max_iterations: int | None = None, num_samples: int | None = None,
                       seed: int = 0, checkpoints: bool = True) -> tuple[list[str], Any]:
    """An aborted simulation restores and finishes: ``Tuner.restore`` semantics, simulated again
    without faults. Returns the violations and the restored ``Simulation`` (None if there was none).

    ``checkpoints``: as the aborted simulation was run (``simulate(checkpoints=...)``). A simulation that
    was not aborted needs no restore: ([], None). One whose storage failed may
    legitimately have no saved state to restore from. Checks the restored run with ``violations``
    (it must not be aborted), that every trial kept the rows up to the checkpoint it resumed from, and
    that a trial saved PAUSED, TERMINATED or ERROR that never ran again kept every row the saved state
    had logged.
    """
    from actors._driver.tuner import Tuner
    from actors.testing.simulate import simulate

    if sim.hung or sim.error is None:
        return [], None
    if not Tuner.can_restore(sim.experiment_path):
        if _storage_failed(sim):
            return [], None  # storage failed: the state may never have been written
        return [f"aborted ({sim.error.splitlines()[0]}) but {sim.experiment_path} cannot be restored"], None
    before = _saved_rows(sim)
    # (capped near the first run's length: a restored run that goes round in circles is reported as hung in a
    # second, not after a million deliveries)
    # (on the machine the first run had: the outcome must not depend on the cores of the one running the test)
    again = simulate(curve, restore=sim.experiment_path, seed=seed, max_iterations=max_iterations,
                     checkpoints=checkpoints, max_deliveries=max(RESTORE_MIN_DELIVERIES, 20 * sim.deliveries),
                     cpus=sim.cpus, members=sim.members)
    out = [f"restored: {v}" for v in violations(again, num_samples=num_samples, may_abort=False)]
    if again.results is not None:
        table = getattr(getattr(again.world, "core", None), "table", None)
        for r in again.results:
            status, ck, logged, old = before.get(r.trial_id, (TrialStatus.PENDING, 0, 0, []))
            new = [_key(h) for h in r.metrics_history]
            upto = _last_lineage_upto(old, ck)
            if new[:upto] != [_key(h) for h in old[:upto]]:
                out.append(f"restored: trial {r.trial_id} lost rows up to its saved checkpoint (iteration {ck})")
            rec = table.trials.get(r.trial_id) if table is not None else None
            if status in (TrialStatus.PAUSED, TrialStatus.TERMINATED, TrialStatus.ERROR) and rec is not None \
                    and rec.run_id == 0:
                # it never ran again: it ends with every row the saved state had logged (its scheduler and
                # searcher were restored having seen them)
                upto = _last_lineage_upto(old, logged)
                if new[:upto] != [_key(h) for h in old[:upto]]:
                    out.append(f"restored: trial {r.trial_id} ({status.value} when saved) never ran again but lost "
                               f"rows the saved state had logged (up to iteration {logged})")
    return out, again


__all__ = ["STALE_LAST_RESULT", "restore_violations", "saved_trials", "violations"]
