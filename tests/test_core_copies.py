"""The controller's side of the trial's re-sends (``TrialActor._liveness``): a copy of a message it already
released changes nothing, before or after the run's end, and ``describe_core`` says what an inbox waits for.

Driven by hand through tests/_core_harness.py: no actor system, no clock.
"""

from __future__ import annotations

from actors._engine.describe import describe_core
from actors._engine.signals import Send, Start
from actors._engine.trial import TrialStatus
from actors.messages import EndReason, RunTrial, TrialEnded, TrialProceed, TrialProcess, TrialResults
from tests._core_harness import FIFO_HOOKS, Harness, make_spec, of_type, sent


def _result(trial_id: str, seq: int) -> TrialResults:
    return TrialResults(trial_id, 1, seq, ({"training_iteration": seq, "loss": 1.0 / seq},), None)


def _logged(h: Harness, tid: str) -> list[int]:
    return [int(r["training_iteration"]) for t, rows in h.store.logged if t == tid for r in rows]


def _one_running_trial() -> tuple[Harness, str]:
    h = Harness(make_spec(num_samples=1, max_concurrent=1))
    h.handle(Start(), at=0.0)
    h.ready(FIFO_HOOKS)
    [run] = sent(h.answer_all(), RunTrial)
    h.handle(TrialProcess(run.trial_id, 1, 4001))
    return h, run.trial_id


def test_copies_change_nothing_and_the_description_names_the_missing_message() -> None:
    h, tid = _one_running_trial()
    assert h.handle(_result(tid, 2)) == [], "batch 2 waits for batch 1"
    text = describe_core(h.core)
    assert text.startswith("controller: phase=RUNNING"), text
    assert f"  trial {tid}: RUNNING phase=STEPPING run=1 pending=CONTINUE inbox: run 1 seq 1 holds [2]" in text, text

    out = h.handle(_result(tid, 1))  # (the lost batch, sent again): both are released, in order
    assert sent(out, TrialProceed) == [TrialProceed(tid, 1, 1), TrialProceed(tid, 1, 2)]
    rec = h.core.table.get(tid)
    assert rec.iteration == 2 and "inbox: run 1 seq 3 holds []" in describe_core(h.core)
    assert _logged(h, tid) == [1, 2]

    for copy in (_result(tid, 1), _result(tid, 2)):  # copies of released batches: dropped by their number
        assert h.handle(copy) == []
    assert rec.iteration == 2 and _logged(h, tid) == [1, 2], "nothing logged twice"
    assert "inbox: run 1 seq 3 holds []" in describe_core(h.core), "nor kept"

    end = TrialEnded(tid, 1, 3, EndReason.COMPLETED)
    h.handle(end)
    h.answer_all()
    assert rec.status is TrialStatus.TERMINATED
    for _ in range(3):  # the end notice sent again (a parked actor's, or one whose first copy was slow)
        out = h.handle(end)
        assert not of_type(out, Send), out
    assert rec.status is TrialStatus.TERMINATED and rec.iteration == 2 and _logged(h, tid) == [1, 2]
    assert f"trial {tid}" not in describe_core(h.core), "a finished trial is not described"


def test_a_description_that_cannot_read_the_core_says_so() -> None:
    h, _ = _one_running_trial()
    h.core.link = None  # type: ignore[assignment]  # (as if another thread changed it mid-read)
    assert describe_core(h.core).startswith("controller: (could not read the core: AttributeError(")
