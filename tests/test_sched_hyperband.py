"""Synchronous HyperBand: bracket shapes, pause/promote/stop, no stranded trial, save/restore."""

from __future__ import annotations

import pickle
import random

import pytest

from actors._engine.reducer import Decision
from actors._engine.trial import TrialStatus
from actors.schedulers import HyperBandScheduler
from tests._fake_controller import Simulator

C, P, S = Decision.CONTINUE, Decision.PAUSE, Decision.STOP


def test_band_for_max_t_81_rf_3() -> None:
    # Ray Tune's shapes: s_max = round(log_3 81) = 4; bracket s holds ceil(5 / (s + 1) * 3**s)
    # trials and first judges them at int(81 / 3**s); brackets fill in the order s = 0, 1, ...
    sched = HyperBandScheduler(max_t=81, reduction_factor=3)
    assert sched.s_max == 4
    assert sched.band() == [(5, 81), (8, 27), (15, 9), (34, 3), (81, 1)]


def test_trials_fill_brackets_in_band_order() -> None:
    sched = HyperBandScheduler(metric="acc", mode="max", max_t=9, reduction_factor=3)
    sim = Simulator(sched)
    for i in range(3 + 5 + 9 + 1):
        sim.add(f"t{i}")
    info = sched.bracket_info()
    assert [(b["s"], b["size"], b["milestone"], len(b["trials"])) for b in info] == [
        (0, 3, 9, 3), (1, 5, 3, 5), (2, 9, 1, 9), (0, 3, 9, 1),
    ]


def _nine() -> Simulator:
    """The s=2 bracket (9 trials, milestone 1) of max_t=9, rf=3; the 8 trials of the brackets
    s=0 and s=1 are added first and marked finished, so they never run."""
    sim = Simulator(HyperBandScheduler(metric="acc", mode="max", max_t=9, reduction_factor=3))
    for i in range(8):
        sim.add(f"f{i}")
        sim.ctl.set_status(f"f{i}", TrialStatus.TERMINATED)
    for i in range(9):
        sim.add(f"t{i}")
    return sim


def _unpause(sim: Simulator) -> list[str]:
    return sim.scheduler.bracket_info()[-1]["to_unpause"]  # type: ignore[attr-defined,no-any-return]


def test_pause_at_milestone_then_promote_top_third() -> None:
    sim = _nine()
    for i in range(9):
        sim.start(f"t{i}")
    # milestone 1: everyone but the last is parked
    assert [sim.report(f"t{i}", acc=i / 10) for i in range(8)] == [P] * 8
    assert all(sim.ctl.status(f"t{i}") is TrialStatus.PAUSED for i in range(8))
    # the last arrival completes the rung: keep ceil(9 / 3) = 3 (t8, t7, t6)
    assert sim.report("t8", acc=0.8) is C
    assert sorted(c[1] for c in sim.ctl.calls_of("stop")) == [f"t{i}" for i in range(6)]
    assert sim.ctl.calls_of("resume") == []  # as in Ray, the winners are run again by choice
    assert _unpause(sim) == ["t6", "t7"]
    assert sim.choose() in ("t6", "t7") and sim.choose() in ("t6", "t7")
    # milestone 3: keep ceil(3 / 3) = 1
    assert [sim.report("t8", acc=0.8), sim.report("t8", acc=0.2)] == [C, P]
    assert [sim.report("t6", acc=0.9), sim.report("t6", acc=1.0)] == [C, P]
    assert sim.report("t7", acc=0.5) is C
    assert sim.report("t7", acc=0.1) is S  # last to arrive and not the best
    assert sim.ctl.status("t8") is TrialStatus.TERMINATED
    assert sim.choose() == "t6"
    assert [sim.report("t6", acc=1.0) for _ in range(5)] == [C] * 5  # iterations 4..8
    assert sim.report("t6", acc=1.0) is S  # 9 = max_t
    assert sim.iteration["t6"] == 9


def test_choose_prefers_pending_and_never_picks_a_parked_trial() -> None:
    sim = _nine()
    for i in range(8):
        sim.start(f"t{i}")
        sim.report(f"t{i}", acc=0.1 * i)
    assert sim.scheduler.choose_trial_to_run(sim.ctl).trial_id == "t8"  # type: ignore[union-attr]
    sim.start("t8")
    assert sim.scheduler.choose_trial_to_run(sim.ctl) is None  # every paused trial waits at its rung


def test_early_end_does_not_leave_the_bracket_waiting() -> None:
    sim = _nine()
    for i in range(9):
        sim.start(f"t{i}")
    for i in range(8):
        sim.report(f"t{i}", acc=i / 10)
    sim.error("t8")  # never reaches the milestone
    # 8 waiting -> Ray keeps ceil(9 / 3) = 3 (the bracket's size, not its live count),
    # halved from inside on_trial_error
    assert _unpause(sim) == ["t5", "t6", "t7"]
    assert sorted(c[1] for c in sim.ctl.calls_of("stop")) == [f"t{i}" for i in range(5)]


def test_trial_done_at_milestone_does_not_block() -> None:
    sim = _nine()
    for i in range(9):
        sim.start(f"t{i}")
    for i in range(8):
        sim.report(f"t{i}", acc=i / 10)
    assert sim.report("t8", acc=0.99, done=True) is C  # a winner that ends on its own
    assert _unpause(sim) == ["t6", "t7"]
    assert sim.ctl.status("t8") is TrialStatus.TERMINATED
    assert {sim.choose(), sim.choose()} == {"t6", "t7"}  # the others go on without it


def test_bracket_that_never_fills_is_halved_once_its_trials_wait() -> None:
    sim = Simulator(HyperBandScheduler(metric="acc", mode="max", max_t=9, reduction_factor=3))
    for i in range(6):  # t0..t2 fill bracket s=0 (3 trials, to 9); t3..t5 sit in s=1 (5 trials, at 3)
        sim.add(f"t{i}")
    quality = {"t0": 0.5, "t1": 0.5, "t2": 0.5, "t3": 0.3, "t4": 0.9, "t5": 0.1}
    sim.run(lambda tid, it: {"acc": quality[tid]}, slots=2, max_iter=20)
    # s=1 halves with 3 of its 5 trials waiting at 3: keep ceil(5 / 3) = 2, so t5 stops at 3
    assert dict(sim.iteration) == {"t0": 9, "t1": 9, "t2": 9, "t3": 9, "t4": 9, "t5": 3}
    assert all(s.status is TrialStatus.TERMINATED for s in sim.ctl.get_trials())


def test_full_band_81_no_stranding_and_exact_promotions() -> None:
    rng = random.Random(7)
    quality = {f"t{i:03d}": rng.random() for i in range(5 + 8 + 15 + 34 + 81)}
    sched = HyperBandScheduler(metric="acc", mode="max", max_t=81, reduction_factor=3)
    sim = Simulator(sched)
    for tid in quality:
        sim.add(tid)
    sim.run(lambda tid, it: {"acc": quality[tid] + it * 1e-6}, slots=4, max_iter=200)
    assert all(s.status is TrialStatus.TERMINATED for s in sim.ctl.get_trials())
    ids = list(quality)
    # (bracket's trials, [(budget, trials that reach it)]): the size shrinks by ceil(n / 3)
    brackets = [
        (ids[:5], [(81, 5)]),
        (ids[5:13], [(27, 8), (81, 3)]),
        (ids[13:28], [(9, 15), (27, 5), (81, 2)]),
        (ids[28:62], [(3, 34), (9, 12), (27, 4), (81, 2)]),
        (ids[62:], [(1, 81), (3, 27), (9, 9), (27, 3), (81, 1)]),
    ]
    for trials, budgets in brackets:
        for budget, survivors in budgets:
            assert sum(sim.iteration[t] >= budget for t in trials) == survivors, (len(trials), budget)
        assert sim.iteration[max(trials, key=quality.__getitem__)] == 81  # the best runs to max_t


def test_stop_last_trials_false() -> None:
    sim = Simulator(HyperBandScheduler(metric="acc", mode="max", max_t=3, reduction_factor=3,
                                       stop_last_trials=False))
    # s_max = 1.  Bracket s=0 (2 trials, milestone 3, no halving): t0, t1.  Bracket s=1
    # (3 trials, milestone 1): t2..t4, only t4 passes 1.  t5 opens a new s=0 bracket.
    # Nobody is stopped at max_t = 3: they run to 5.
    for i in range(6):
        sim.add(f"t{i}")
    sim.run(lambda tid, it: {"acc": int(tid[1:])}, slots=3, max_iter=5)
    assert sim.iteration == {"t0": 5, "t1": 5, "t2": 1, "t3": 1, "t4": 5, "t5": 5}


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"mode": "best"}, "mode must be 'min' or 'max'"),
        ({"max_t": -1}, "max_t must be > 0"),
        ({"reduction_factor": 1}, "reduction_factor must be > 1"),  # 2.5 is fine, as in Ray (flags.json)
        ({"reduction_factor": 0.5}, "reduction_factor must be > 1"),
    ],
)
def test_bad_arguments(kwargs: dict[str, object], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        HyperBandScheduler(**kwargs)  # type: ignore[arg-type]


def _script(sim: Simulator, quality: dict[str, float], steps: int) -> None:
    """Deterministic engine loop, cut after ``steps`` reports (so a save can be taken mid-way)."""
    done = 0
    while done < steps:
        sim.fill(3)
        running = sim.running()
        if not running:
            return
        tid = running[0]
        it = sim.iteration[tid] + 1
        sim.report(tid, done=it >= 20, acc=quality[tid])
        done += 1


def test_save_restore_mid_stream_matches_uninterrupted_run() -> None:
    quality = {f"t{i}": (i * 37 % 11) / 11 for i in range(14)}

    def fresh() -> Simulator:
        sim = Simulator(HyperBandScheduler(metric="acc", mode="max", max_t=9, reduction_factor=3))
        for tid in quality:
            sim.add(tid)
        return sim

    full = fresh()
    _script(full, quality, 10_000)
    part = fresh()
    _script(part, quality, 12)
    state = pickle.loads(pickle.dumps(part.scheduler.save()))
    restored = HyperBandScheduler(metric="acc", mode="max", max_t=9, reduction_factor=3)
    restored.restore(state)
    part.scheduler = restored
    _script(part, quality, 10_000)
    assert part.decisions == full.decisions
    assert part.ctl.calls == full.ctl.calls
    assert part.iteration == full.iteration
    assert part.scheduler.debug_string() == full.scheduler.debug_string()  # the counts travel with the state


def test_a_state_saved_before_the_debug_counts_still_restores() -> None:
    sim = Simulator(HyperBandScheduler(metric="acc", mode="max", max_t=9, reduction_factor=3))
    for i in range(5):
        sim.add(f"t{i}")
    state = pickle.loads(pickle.dumps(sim.scheduler.save()))
    for key in ("_num_stopped", "_status"):
        del state["state"][key]
    older = HyperBandScheduler(metric="acc", mode="max", max_t=9, reduction_factor=3)
    older.restore(state)
    assert older.debug_string().startswith("Using HyperBand: num_stopped=0 total_brackets=")


def test_state_saved_by_the_pre_ray_layout_is_refused_by_name() -> None:
    """HyperBand's state changed when it took Ray Tune 2.60's bracket layout: an experiment saved before
    (its state holds ``_brackets``/``_next_s``/``_promoted``) gets a clear refusal, not a crash later."""
    sched = HyperBandScheduler(max_t=81, reduction_factor=3, metric="loss", mode="min")
    saved = sched.save()
    saved["state"] = {"_brackets": [], "_trial_bracket": {}, "_next_s": 4, "_promoted": set(), "_stopped": set()}
    with pytest.raises(ValueError, match=r"saved state has no _bands, _current, _gone: it was saved by an older"):
        HyperBandScheduler(max_t=81, reduction_factor=3, metric="loss", mode="min").restore(saved)


def test_a_trial_it_stopped_but_the_restored_table_resumes_is_stopped_when_added_again() -> None:
    """An abort can save HyperBand's state after a decision the saved table never applied (the call
    was answered while the experiment was ending). Restored, the trial is PENDING in the table but gone
    from its bracket, so choose_trial_to_run would never pick it and the run would wait forever; HyperBand
    stops it when the core adds it again. A trial it did not stop is only re-added."""
    sim = _nine()
    for i in range(9):
        sim.start(f"t{i}")
    [sim.report(f"t{i}", acc=i / 10) for i in range(9)]  # milestone 1: t0..t5 stopped, t6..t8 go on
    state = pickle.loads(pickle.dumps(sim.scheduler.save()))
    restored = HyperBandScheduler(metric="acc", mode="max", max_t=9, reduction_factor=3)
    restored.restore(state)
    sim.scheduler = restored
    sim.ctl.take()
    for tid in ("t0", "t6"):
        sim.ctl.set_status(tid, TrialStatus.PENDING)  # what the frozen table says of both
        restored.on_trial_add(sim.ctl, sim.ctl.get(tid))
    assert sim.ctl.take() == [("stop", "t0")]
    sim.ctl.set_status("t1", TrialStatus.TERMINATED)
    restored.on_trial_add(sim.ctl, sim.ctl.get("t1"))  # stopped and finished: nothing to do
    assert sim.ctl.take() == []


# ------------------------------------------------------- retries: where Ray's HyperBand would wait forever
def test_a_retried_trial_rejoins_a_bracket_and_runs_again() -> None:
    """Ray's ``_requeue_trial``: on_trial_error takes the trial out of its bracket, on_trial_add puts
    it in the bracket being filled (here its own, which has room again), with no result yet."""
    sim = Simulator(HyperBandScheduler(metric="acc", mode="max", max_t=9, reduction_factor=3))
    for i in range(3):
        sim.add(f"t{i}")
    sim.start("t0")
    sim.report("t0", acc=0.5)
    snap = sim.ctl.set_status("t0", TrialStatus.PENDING)
    sim.scheduler.on_trial_error(sim.ctl, snap)
    sim.scheduler.on_trial_add(sim.ctl, snap)
    (first, *_) = sim.scheduler.bracket_info()
    assert "t0" in first["trials"]
    sim.start("t1")
    sim.start("t2")
    assert sim.choose() == "t0"  # the bracket's only trial waiting to run


def _s2_bracket(kept: int) -> Simulator:
    """Brackets s=0 and s=1 filled with trials that never run, then the nine trials of the s=2 bracket
    (max_t 9, reduction factor 3, on time_total_s), of which all but the first ``kept`` leave before running."""
    sim = Simulator(HyperBandScheduler(metric="acc", mode="max", max_t=9, reduction_factor=3,
                                       time_attr="time_total_s"))
    for i in range(8):
        sim.add(f"f{i}")
        sim.ctl.set_status(f"f{i}", TrialStatus.TERMINATED)
    for i in range(9):
        sim.add(f"t{i}")
    for i in range(kept, 9):
        sim.complete(f"t{i}")
    return sim


def test_a_trial_resumed_past_two_milestones_is_halved_on_not_parked() -> None:
    """Alone in its bracket and resumed from a later checkpoint, the trial reports past the next
    milestone too: Ray pauses it there with no trial left to complete the rung (it waits forever);
    audition halves again at once."""
    sim = _s2_bracket(kept=1)  # t0 is alone in the s=2 bracket
    sim.start("t0")
    assert sim.report("t0", acc=0.5, t=4) is C  # milestones 1 and 3 are behind it: keep going to 9


def test_a_halving_on_a_trial_leaving_halves_again_when_the_rest_are_past_the_new_milestone() -> None:
    """t0, resumed from a later checkpoint, waits at time 3 for t1 in the s=2 bracket (milestone 1);
    t1 completes without a result the scheduler saw (its one result said done), so the halving comes
    from on_trial_remove with no trial being decided: the new milestone 3 is behind t0 as well. Ray
    leaves t0 paused with nothing to resume it (it waits forever); audition halves again."""
    sim = _s2_bracket(kept=2)  # t0 and t1 share the s=2 bracket
    sim.start("t0")
    assert sim.report("t0", acc=0.5, t=3) is P and sim.ctl.status("t0") is TrialStatus.PAUSED
    sim.complete("t1")
    assert sim.choose() == "t0"


def test_a_trial_leaving_after_the_first_halving_does_not_strand_the_paused_ones() -> None:
    """After the first halving, the survivors t6 and t8 wait at milestone 3 for t7, which fails and
    is retried elsewhere: Ray no longer processes a bracket once halved, so they would wait forever;
    audition halves when every remaining trial waits."""
    sim = _nine()
    for i in range(9):
        sim.start(f"t{i}")
    [sim.report(f"t{i}", acc=i / 10) for i in range(9)]  # milestone 1: t6, t7, t8 kept
    for tid in ("t6", "t8"):
        if sim.ctl.status(tid) is TrialStatus.PAUSED:
            sim.start(tid)
        while sim.report(tid, acc=0.9) is C:
            pass
    assert sim.ctl.status("t6") is TrialStatus.PAUSED and sim.ctl.status("t8") is TrialStatus.PAUSED
    sim.error("t7")
    assert sim.choose() in ("t6", "t8")


def test_trials_that_ended_unheard_leave_their_bracket() -> None:
    """The scheduler's hook for a trial's end failed (the run aborted and was restored from a state
    saved without it): the trial is TERMINATED in the table but still live in its bracket, whose
    halving would wait for it forever. choose_trial_to_run takes such trials out first."""
    sim = _nine()
    for i in range(1, 9):
        sim.ctl.set_status(f"t{i}", TrialStatus.TERMINATED)  # ended; the scheduler never heard
    sim.start("t0")
    assert sim.report("t0", acc=0.5) is P  # at milestone 1, waiting for the rest of its bracket
    assert sim.choose() == "t0"
