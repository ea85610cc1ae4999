"""The core's state in one line per live trial: what a stuck run waits for (``kill -USR2``, a test's timeout).

A hung experiment shows every process idle in ``select``; its stacks cannot say which message the core
still waits for. This says it: the phase, the scheduler calls in flight, and for each trial not finished
its status, phase, run, pending decision, the message number its inbox waits for (and the later ones it
holds), its batches waiting for a decision, and the iteration reached. Read only; never raises.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from actors._engine.core import ExperimentCore


def describe_core(core: ExperimentCore) -> str:
    """A few lines on ``core``; a line saying why if reading it failed (the
    signal may land while another thread changes it)."""
    try:
        return _describe(core)
    except Exception as exc:  # a diagnostic must never take the process down
        return f"controller: (could not read the core: {exc!r})"


def _describe(core: ExperimentCore) -> str:
    calls = sorted((seq, c.kind.name, c.trial_id) for seq, c in list(core.link.calls.items()))
    lines = [f"controller: phase={core.phase.name} now={core.now:.1f} scheduler_calls_in_flight={calls[:8]}"
             f"{'...' if len(calls) > 8 else ''} search_done={core.source.done}"]
    for rec in list(core.table.trials.values()):
        if rec.status.is_finished:
            continue
        inbox = core.pool.inbox.get(rec.trial_id)
        waits = "-" if inbox is None else f"run {inbox[0]} seq {inbox[1].next} holds {sorted(inbox[1].early)}"
        undecided = len(core.results.unlogged.get(rec.trial_id) or [])
        lines.append(f"  trial {rec.trial_id}: {rec.status.name} phase={rec.phase.name} run={rec.run_id} "
                     f"pending={rec.pending.name} inbox: {waits}; batches awaiting a decision={undecided} "
                     f"iteration={rec.iteration} actor={core.pool.actor_of.get(rec.trial_id)}")
    return "\n".join(lines)


__all__ = ["describe_core"]
