"""``Tuner.restore``'s storage side, in the controller: storage made to agree with the rewound table.

The driver rewinds the saved table (``actors._driver.restore``) and tags each row it changed with
what to do (``RestoreMark``). Before any trial starts, ``prepare_storage`` removes
what the crashed run wrote after the state was saved (result rows, checkpoints, whole trial
directories), because the restored searcher, scheduler and table have never seen it; except that a
resumed trial continues from the newest checkpoint committed in storage, even one newer than the
state, when its history reaches it (the results its manifest carries fill it in).
"""

from __future__ import annotations

import logging
import posixpath
import re
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from actors._engine.marks import MarkKind
from actors._engine.store import RestoreMark
from actors._engine.trial import TrialStatus
from actors._shell.experiment_state import TRIAL_DIRS_NAMED

log = logging.getLogger("audition")


def prepare_storage(ctx: Any, layout: Any, state: dict[str, Any]) -> dict[str, list[Any]]:
    """Make storage match the restored table; returns each touched trial's kept checkpoints.

    Runs in the controller before any trial starts, so nothing else writes here. For every trial
    that restoring resumes, restarts or ends: checkpoint directories the state does not know
    (uncommitted, or committed after the state was saved) are deleted, a saved checkpoint that
    has disappeared is replaced by an older committed one (or none), and result rows after the
    point the trial continues from are truncated. Trial directories of the run's naming scheme
    that are not in the table belong to trials suggested after the state was saved: the restored
    searcher suggests them again, so they are deleted. So are checkpoints the state lists as
    retired (retention was deleting them when the run died).
    """
    from storage import delete_checkpoint
    from storage._io import list_dir, remove_tree

    rows = {r["trial_id"]: r for r in state["trials"]}
    own = re.compile(rf"{re.escape(str(state['trial_prefix']))}_\d{{5,}}")
    taken = {posixpath.basename(layout.trial_dir(tid)) for tid in rows} | set(state.get("kept_dirs") or ())
    # named as Ray names them, or by trial_dirname_creator: any directory may be a trial's
    named = state.get("trial_dirs") == TRIAL_DIRS_NAMED or any(r.get("dirname", t) != t for t, r in rows.items())
    stale = [e["name"] for e in list_dir(ctx, layout.experiment_dir)
             if e.get("type") == "directory" and posixpath.basename(e["name"].rstrip("/")) not in taken
             and (own.fullmatch(posixpath.basename(e["name"].rstrip("/")))
                  or (named and _is_trial_dir(ctx, e["name"])))]
    # (a restarted trial is a new one: nothing of it is in storage yet)
    touched = [r for r in rows.values() if r.get("restore") and r["restore"] != RestoreMark.RESTART]
    inside = layout.experiment_dir.rstrip("/") + "/"
    retired = [p for p in state.get("retired") or [] if isinstance(p, str) and p.startswith(inside)]
    with ThreadPoolExecutor(max_workers=8, thread_name_prefix="restore") as pool:
        list(pool.map(lambda p: remove_tree(ctx, p), stale))
        list(pool.map(lambda p: delete_checkpoint(ctx, p), retired))  # a deletion cut short
        kept = dict(zip([r["trial_id"] for r in touched],
                        pool.map(lambda r: _prepare_trial(ctx, layout, r), touched)))
    if stale:
        log.info("restore: removed %d trial dir(s) written after the last state save", len(stale))
    return kept


def _is_trial_dir(ctx: Any, path: str) -> bool:
    """A directory the controller made for a trial (it writes params.json first), not a dot-dir."""
    from storage import PARAMS_NAME, exists

    base = posixpath.basename(path.rstrip("/"))
    return not base.startswith(".") and exists(ctx, posixpath.join(path.rstrip("/"), PARAMS_NAME))


def _prepare_trial(ctx: Any, layout: Any, row: dict[str, Any]) -> list[Any]:
    from actors.messages import CheckpointRef
    from storage import ResultWriter, delete_checkpoint, list_checkpoints
    from storage._io import remove_tree

    tid = row["trial_id"]
    max_index = int(row.get("max_index", -1))
    if row["restore"] == RestoreMark.RESUME:
        reach = _history_reach(ctx, layout, row)  # (read once: both steps measure the same history)
        max_index = row["max_index"] = _resume_newest(ctx, layout, row, _known_reached(ctx, layout, row, max_index,
                                                                                      reach[0]), reach)
    kept: list[CheckpointRef] = []
    for info in list_checkpoints(ctx, layout.trial_dir(tid)):
        if not info.committed:
            remove_tree(ctx, info.path)
        elif info.index > max_index:
            delete_checkpoint(ctx, info.path)  # committed after the state: its results are unknown
        else:
            meta = info.metadata
            kept.append(CheckpointRef(info.path, info.index, int(meta.get("iteration", 0)),
                                      float(meta.get("time_total_s", 0.0)), dict(meta.get("metrics") or {})))
    ck = row.get("checkpoint")
    if row["restore"] == RestoreMark.RESUME and ck is not None and not _still_there(ctx, ck["path"], kept):
        older = [c for c in kept if c.iteration <= int(ck["iteration"])]
        if older:
            c = older[-1]
            row["checkpoint"] = {"path": c.path, "index": c.index, "iteration": c.iteration,
                                 "time_total_s": c.time_total_s, "metrics": c.metrics}
        else:
            row["checkpoint"] = None
        log.warning("restore: checkpoint %s of trial %s is gone; continuing from %s", ctx.uri(ck["path"]),
                    tid, ctx.uri(row["checkpoint"]["path"]) if row["checkpoint"] else "scratch")
    if row["restore"] == RestoreMark.END:
        upto = int(row["last_result"].get("training_iteration", 0))
    elif row.get("checkpoint"):
        upto = int(row["checkpoint"]["iteration"])
    else:
        upto = 0
    writer = ResultWriter(ctx, layout, tid)
    # a PBT clone's checkpoint (its source's) with none of the clone's rows logged when the state was saved,
    # behind the trial's own last row: only rows of the clone's lineage (written after the state) go
    ck = row.get("checkpoint")
    empty_clone = (row["restore"] == RestoreMark.RESUME and ck is not None
                   and (ck.get("metrics") or {}).get("trial_id", tid) != tid
                   and int(row.get("saved_logged_iteration") or upto) <= upto
                   and int(row["last_result"].get("training_iteration", 0)) > upto)
    if (row["restore"] == RestoreMark.RESUME and row["status"] == TrialStatus.PAUSED.value and not empty_clone
            and not _exploited(row)):
        # a paused trial keeps the rows the saved state had logged: the restored scheduler and searcher saw them,
        # and a trial its scheduler stops before it runs again (HyperBand's halving) ends with them, as in a run
        # not interrupted; the rows past its checkpoint are dropped when it starts again (TrialTable.start)
        upto = max(upto, min(int(row.get("saved_logged_iteration") or 0),
                             int(row["last_result"].get("training_iteration", 0))))
    writer.truncate(upto, lineage_only=empty_clone)
    if row["restore"] == RestoreMark.RESUME:
        # the history now ends where the trial continues from (a paused one: where the state left it), and so
        # does its last result until it reports again (a trial stopped before that keeps it)
        history = writer.json.rows()
        row["last_result"] = history[-1] if history else {}
    writer.close()
    row["logged_iteration"] = upto
    return kept


def _history_reach(ctx: Any, layout: Any, row: dict[str, Any]) -> tuple[int, list[dict[str, Any]]]:
    """``lineage_reach`` of the trial's history in storage (cloned: its saved marks hold an exploit)."""
    from storage import read_results

    return lineage_reach(read_results(ctx, layout, row["trial_id"]), cloned=_exploited(row))


def _exploited(row: dict[str, Any]) -> bool:
    """Whether the row's saved marks hold a PBT exploit (its history then mixes lineages)."""
    return any(isinstance(m, dict) and m.get("kind") == MarkKind.EXPLOIT.value for m in row.get("marks") or ())


def _known_reached(ctx: Any, layout: Any, row: dict[str, Any], max_index: int, reach: int) -> int:
    """The highest checkpoint index the state knows whose results storage holds: ``max_index``, unless the
    state's own checkpoint is past the history (its result was never logged: a storage failure or a kill
    while its batch waited for a decision). Then the checkpoints from it on are looked at again, as if
    committed after the state: the history is filled from their manifests, or the trial resumes from an
    older one (and the newer ones are deleted), never past a gap in its history."""
    from storage import list_checkpoints

    ck = row.get("checkpoint")
    if ck is None or (ck.get("metrics") or {}).get("trial_id", row["trial_id"]) != row["trial_id"]:
        return max_index  # (none, or a PBT source's: its rows are that trial's)
    if int(ck["iteration"]) <= reach:
        return max_index
    reached = [i.index for i in list_checkpoints(ctx, layout.trial_dir(row["trial_id"]))
               if i.committed and i.index <= max_index and int(i.metadata.get("iteration", 0)) <= reach]
    return max(reached, default=-1)


def _resume_newest(ctx: Any, layout: Any, row: dict[str, Any], max_index: int,
                   reach: tuple[int, list[dict[str, Any]]]) -> int:
    """Checkpoints committed after the state was saved: the trial resumes from the newest one its
    history reaches (``actors._shell.recovery``), the history filled from their manifests. Returns the
    highest index to keep; the ones above it are deleted as before."""
    from actors._shell.recovery import choose, found_from
    from storage import ResultWriter, committed_after

    tid = row["trial_id"]
    infos = committed_after(ctx, layout.trial_dir(tid), max_index)
    if not infos:
        return max_index
    logged, prefix = reach  # the history's reach (``_history_reach``)
    got = choose([found_from(i) for i in infos], logged, prefix)
    c = got.checkpoint
    if c is None:
        return max_index
    if got.rows:
        writer = ResultWriter(ctx, layout, tid)
        writer.truncate(logged)
        writer.append(got.rows)
        writer.close()
    # the trial's last result is the history's last row: a run resuming from the final checkpoint
    # reports nothing more, and its Result.metrics must not be an older row (also when the history
    # already held the rows the state had not yet seen)
    reached = [r for r in (*prefix, *got.rows) if int(r.get("training_iteration", 0)) <= c.iteration]
    seen = int(row["last_result"].get("training_iteration", 0))
    # the restored stopper, scheduler and searcher never saw these rows: the core shows them to the
    # stop criteria before the trial runs on (a trial stopped at one of them ends there)
    row["unseen"] = [dict(r) for r in reached if int(r.get("training_iteration", 0)) > seen]
    if row["unseen"]:
        row["last_result"] = dict(reached[-1])
    row["checkpoint"] = {"path": c.path, "index": c.index, "iteration": c.iteration,
                         "time_total_s": c.time_total_s, "metrics": c.metrics}
    log.info("restore: trial %s resumes from %s, committed after the state was saved", tid, ctx.uri(c.path))
    return c.index


def lineage_reach(rows: list[dict[str, Any]], cloned: bool) -> tuple[int, list[dict[str, Any]]]:
    """How far a trial's history reaches without a gap, and the rows of its last lineage up to there.

    A PBT clone's rows go on from its source's checkpoint after the trial's own (as in Ray), so a row whose
    iteration does not follow the one before starts a new lineage when it is a clone's first: it says
    ``pbt_exploit``, or (a retry redid it) it is a run's first (``iterations_since_restore`` 1) in a trial
    that was cloned (``cloned``, or a ``pbt_exploit`` row). Anything else out of order is a gap: the
    history reaches the row before it."""
    cloned = cloned or any("pbt_exploit" in r for r in rows)
    logged, lineage = 0, []
    for r in rows:
        it = r.get("training_iteration")
        if not isinstance(it, int) or isinstance(it, bool):
            break
        if it == logged + 1:
            logged = it
            lineage.append(r)
        elif cloned and ("pbt_exploit" in r or r.get("iterations_since_restore") == 1):
            logged, lineage = it, [r]
        elif it > logged:
            break
    return logged, lineage


def mark_last_done(ctx: Any, layout: Any, trial_id: str) -> None:
    """The history's last row says ``done=True`` (a trial that ended at it)."""
    from storage import ResultWriter

    writer = ResultWriter(ctx, layout, trial_id)
    rows = writer.json.rows()
    if rows and not rows[-1].get("done"):
        last = rows[-1]
        writer.truncate(int(last.get("training_iteration", 0)) - 1)
        writer.append([{**last, "done": True}])
    writer.close()


def _still_there(ctx: Any, path: str, kept: list[Any]) -> bool:
    """The saved checkpoint is usable: listed as kept, or (a PBT clone's) committed elsewhere."""
    from storage import is_committed

    return any(c.path == path for c in kept) or is_committed(ctx, path)


__all__ = ["lineage_reach", "mark_last_done", "prepare_storage"]
