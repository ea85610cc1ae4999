"""Median stopping rule: stop decisions reasoned by hand, yielding, choice order, save/restore."""

from __future__ import annotations

import pickle

import pytest

from actors._engine.reducer import Decision
from actors._engine.trial import TrialStatus
from actors.schedulers import MedianStoppingRule
from tests._fake_controller import Simulator

C, P, S = Decision.CONTINUE, Decision.PAUSE, Decision.STOP

LOSSES = {
    "A": [1.0, 0.9, 0.8, 0.7],
    "B": [1.0, 0.8, 0.6, 0.4],
    "C": [2.0, 1.8, 1.6, 1.4],
    "D": [1.0, 0.85, 0.5, 0.9],
    "E": [1.0, 0.95, 0.9, 0.8],
}


def _rule(**kw: object) -> MedianStoppingRule:
    args = {"time_attr": "training_iteration", "metric": "loss", "mode": "min", "grace_period": 2,
            "min_samples_required": 2}
    args.update(kw)
    return MedianStoppingRule(**args)  # type: ignore[arg-type]


def _play(sim: Simulator, order: str) -> dict[str, list[Decision]]:
    """Each trial in turn runs until it is stopped or has reported all its losses."""
    out: dict[str, list[Decision]] = {}
    for tid in order:
        sim.add(tid)
        sim.choose()
        for i, loss in enumerate(LOSSES[tid]):
            d = sim.report(tid, loss=loss, done=i == len(LOSSES[tid]) - 1)
            out.setdefault(tid, []).append(d)
            if d is not C:
                break
    return out


def test_stop_decisions() -> None:
    out = _play(Simulator(_rule()), "ABCDE")
    # A, B: fewer than 2 other trials have reached their time points -> never judged.
    assert out["A"] == [C, C, C, C]
    assert out["B"] == [C, C, C, C]
    # C at t=2: averages over [2, 2] of A (0.9) and B (0.8) -> median 0.85; C's best 1.8 is worse.
    assert out["C"] == [C, S]
    # D at t=2: A .9, B .8, C 1.8 -> median .9, best .85 ok.  t=3: A mean(.9,.8)=.85,
    # B mean(.8,.6)=.7 (C stopped at 2) -> median .775, best .5 ok.  t=4: A .8, B .6 -> .7, best .5 ok.
    assert out["D"] == [C, C, C, C]
    # E at t=2: A .9, B .8, C 1.8, D .85 -> median .875; E's best .95 is worse.
    assert out["E"] == [C, S]


def test_max_mode() -> None:
    sim = Simulator(_rule(metric="acc", mode="max"))
    for tid in "ABC":
        sim.add(tid)
        sim.choose()
        for i, loss in enumerate(LOSSES[tid]):
            if sim.report(tid, acc=-loss, done=i == 3) is not C:
                break
    assert sim.ctl.status("C") is TrialStatus.TERMINATED
    assert ("C", 2, S) in sim.decisions


def test_soft_stop_pauses_once_and_runs_fifo_afterwards() -> None:
    sim = Simulator(_rule(hard_stop=False))
    out = _play(sim, "ABC")
    assert out["C"] == [C, P]
    assert sim.ctl.status("C") is TrialStatus.PAUSED
    assert sim.choose() == "C"  # nothing else waits
    assert [sim.report("C", loss=1.6), sim.report("C", loss=1.4)] == [C, C]  # never judged again


def _pair(**kw: object) -> Simulator:
    sim = Simulator(_rule(grace_period=1, min_samples_required=3, **kw))
    sim.add("A")
    sim.add("B")
    sim.start("A")
    return sim


def test_yields_whenever_a_trial_waits_and_it_cannot_judge() -> None:
    # Ray Tune's rule: yield if any trial is pending or paused (audition used to yield only to
    # a trial that was behind; the differential test holds it to Ray's decisions now).
    sim = _pair()
    assert sim.report("A", loss=1.0) is P  # too few samples and B is pending
    assert sim.choose() == "B"  # pending first
    assert sim.report("B", loss=1.0) is P  # A waits (paused)
    assert sim.choose() == "A"  # first in, first out


def test_min_time_slice_spaces_out_yields() -> None:
    sim = _pair(min_time_slice=2)
    assert sim.report("A", loss=1.0) is P  # first yield at t=1
    assert sim.choose() == "B"
    assert sim.report("B", loss=1.0) is P  # B yields at t=1 (A waits)
    assert sim.choose() == "A"
    # A restarts at iteration 2: 2-1 and 3-1 are <= 2 -> keep running; at 4 it may yield
    assert [sim.report("A", loss=1.0) for _ in range(3)] == [C, C, P]


def test_no_yield_when_nobody_waits() -> None:
    sim = Simulator(_rule(grace_period=1, min_samples_required=3))
    sim.add("A")
    sim.start("A")
    assert [sim.report("A", loss=1.0) for _ in range(3)] == [C, C, C]


def test_choose_order() -> None:
    rule = _rule(grace_period=100)  # nobody is judged or yields: we only build histories
    sim = Simulator(rule)
    for tid, n in (("X", 3), ("Y", 1), ("Z", 2)):
        sim.add(tid)
        sim.start(tid)
        for _ in range(n):
            sim.report(tid, loss=1.0)
        sim.ctl.set_status(tid, TrialStatus.PAUSED)
    rule._stopped.add("Y")  # as if the rule had paused it with hard_stop=False
    # first in, first out, as Ray Tune's FIFO choice (progress and soft stops do not matter)
    assert rule.choose_trial_to_run(sim.ctl).trial_id == "X"  # type: ignore[union-attr]
    sim.ctl.set_status("X", TrialStatus.TERMINATED)
    assert rule.choose_trial_to_run(sim.ctl).trial_id == "Y"  # type: ignore[union-attr]
    sim.add("W")
    assert rule.choose_trial_to_run(sim.ctl).trial_id == "W"  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"mode": "up"}, "mode must be 'min' or 'max'"),
        ({"grace_period": -1}, "grace_period must be >= 0"),
        ({"min_samples_required": 0}, "min_samples_required must be >= 1"),
        ({"min_time_slice": -1}, "min_time_slice must be >= 0"),
    ],
)
def test_bad_arguments(kwargs: dict[str, object], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        MedianStoppingRule(**kwargs)  # type: ignore[arg-type]


def test_restarted_trial_keeps_every_result() -> None:
    rule = _rule(grace_period=0)
    sim = Simulator(rule)
    sim.add("A")
    sim.start("A")
    for loss in (1.0, 2.0, 3.0):
        sim.report("A", loss=loss)
    assert rule.running_average("A", 3) == 2.0
    # restored from a checkpoint at iteration 1: the redone iteration 2 is kept beside the first
    # one, as Ray Tune keeps it (audition used to replace redone results)
    rule.on_trial_result(sim.ctl, sim.ctl.get("A"), {"loss": 5.0, "training_iteration": 2})
    assert rule.running_average("A", 3) == 2.75


def test_save_restore_mid_stream() -> None:
    full = Simulator(_rule())
    expected = _play(full, "ABCDE")
    part = Simulator(_rule())
    first = _play(part, "AB")
    state = pickle.loads(pickle.dumps(part.scheduler.save()))
    fresh = _rule()
    fresh.restore(state)
    part.scheduler = fresh
    rest = _play(part, "CDE")
    assert {**first, **rest} == expected
    assert part.decisions == full.decisions


def test_debug_string_and_decisions_read_as_rays() -> None:
    """Recorded from Ray 2.60 (``benchmarks/ray_oracle/record_api_semantics.py``): four trials report
    ``loss = (n + 1) / it`` until told STOP."""
    from actors.schedulers import FIFOScheduler
    from tests._fake_controller import FakeController
    from tests._ray_api import RAY_API

    ray = RAY_API["asha_debug_string"]
    assert FIFOScheduler().debug_string() == ray["fifo"]
    median = MedianStoppingRule(metric="loss", mode="min", grace_period=1, min_samples_required=2)
    ctl = FakeController()
    snaps = [ctl.add_trial(t) for t in "ABCD"]
    for snap in snaps:
        median.on_trial_add(ctl, snap)
    snaps = [ctl.set_status(t, TrialStatus.RUNNING) for t in "ABCD"]  # none waits (Ray's: no live trial waits)
    decisions, stopped = [], set()
    for it in range(1, 6):
        for n, snap in enumerate(snaps):
            if snap.trial_id not in stopped:
                d = median.on_trial_result(ctl, snap, {"training_iteration": it, "time_total_s": float(it),
                                                       "loss": (n + 1) / it})
                decisions.append(f"{snap.trial_id}{it}:{d}")
                if d == "STOP":
                    stopped.add(snap.trial_id)
    assert decisions == ray["median_decisions"]
    assert median.debug_string() == ray["median"]
