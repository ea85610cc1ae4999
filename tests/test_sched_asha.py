"""ASHA: rung placement, who stops where (expected outcomes reasoned by hand), save/restore."""

from __future__ import annotations

import pickle
import random
from typing import Any

import pytest

from actors._engine.reducer import Decision
from actors.schedulers import ASHAScheduler, AsyncHyperBandScheduler
from actors.schedulers._common import MissingResultKeyError
from tests._fake_controller import Simulator

C, S = Decision.CONTINUE, Decision.STOP


def _sim(**kw: object) -> Simulator:
    args = {"metric": "acc", "mode": "max", "max_t": 16, "grace_period": 1, "reduction_factor": 2}
    args.update(kw)
    sim = Simulator(ASHAScheduler(**args))  # type: ignore[arg-type]
    for tid in "ABCD":
        sim.add(tid)
        sim.start(tid)
    return sim


def test_rungs_are_grace_times_powers_up_to_max_t() -> None:
    assert ASHAScheduler(max_t=100, grace_period=1, reduction_factor=4).milestones() == [1, 4, 16, 64]
    # Ray Tune's rung count int(log(max_t/grace)/log(rf) + 1) keeps a rung at max_t itself
    assert ASHAScheduler(max_t=64, grace_period=1, reduction_factor=4).milestones() == [1, 4, 16, 64]
    two = ASHAScheduler(max_t=16, grace_period=1, reduction_factor=2, brackets=2)
    assert two.milestones(0) == [1, 2, 4, 8, 16]
    assert two.milestones(1) == [2, 4, 8, 16]


def test_alias_and_batching() -> None:
    assert AsyncHyperBandScheduler is ASHAScheduler
    assert type(ASHAScheduler()).__name__ == "AsyncHyperBandScheduler"  # Ray's class name (ASHA: its alias)
    assert ASHAScheduler().batching_allowed() is False


def test_a_state_saved_under_the_former_class_name_still_restores() -> None:
    """States written before the class took Ray's name say ``"ASHAScheduler"``; only ASHA itself takes
    them (a subclass is still told the state is another scheduler's)."""
    state = ASHAScheduler(max_t=9).save()
    state["scheduler"] = "ASHAScheduler"
    ASHAScheduler(max_t=9).restore(state)

    class Custom(ASHAScheduler):
        pass

    with pytest.raises(ValueError, match="saved by 'ASHAScheduler', not Custom"):
        Custom(max_t=9).restore(state)


def test_who_stops_at_which_rung() -> None:
    # rf=2: at a rung with n recorded values (incl. the new one) the best ceil(n/2) go on.
    sim = _sim()
    # rung 1: A .5 (alone) ok; B .6 best of 2 ok; C .4 is third of 3, top 2 = {.6,.5} -> stop; D .7 ok
    assert [sim.report(t, acc=a) for t, a in zip("ABCD", [0.5, 0.6, 0.4, 0.7], strict=True)] == [C, C, S, C]
    # rung 2: A .55 alone ok; B .5 vs A .55, top 1 -> stop; D .9 top 2 of 3 -> ok
    assert [sim.report(t, acc=a) for t, a in zip("ABD", [0.55, 0.5, 0.9], strict=True)] == [C, S, C]
    assert [sim.report(t, acc=0.6) for t in "AD"] == [C, C]  # iteration 3: no rung
    assert [sim.report(t, acc=a) for t, a in zip("AD", [0.6, 0.95], strict=True)] == [C, C]  # rung 4
    for _ in range(3):  # iterations 5..7
        assert [sim.report(t, acc=0.9) for t in "AD"] == [C, C]
    # rung 8: D reports first (alone, ok), then A .5 loses to D .97 -> stop
    assert sim.report("D", acc=0.97) is C
    assert sim.report("A", acc=0.5) is S
    for _ in range(9, 16):
        assert sim.report("D", acc=0.97) is C
    assert sim.report("D", acc=0.97) is S  # iteration 16 = max_t
    stopped_at = {tid: it for tid, it, d in sim.decisions if d is S}
    assert stopped_at == {"C": 1, "B": 2, "A": 8, "D": 16}


def test_min_mode_mirrors_max_mode() -> None:
    sim = _sim(metric="loss", mode="min")
    out = [sim.report(t, loss=-a) for t, a in zip("ABCD", [0.5, 0.6, 0.4, 0.7], strict=True)]
    assert out == [C, C, S, C]


def test_ties_go_on_and_nan_never_loses() -> None:
    sim = _sim()
    assert sim.report("A", acc=0.5) is C
    assert sim.report("B", acc=0.5) is C  # equal to the cutoff: not below it
    assert sim.report("C", acc=float("nan")) is C  # as in Ray Tune: NaN < cutoff is false
    assert sim.report("D", acc=0.4) is S  # numpy.nanpercentile ignores C's NaN: cutoff 0.5


def test_only_the_highest_rung_passed_is_judged() -> None:
    sched = ASHAScheduler(time_attr="time_total_s", metric="acc", mode="max", max_t=16, grace_period=1,
                          reduction_factor=2)
    sim = Simulator(sched)
    sim.add("A")
    sim.start("A")
    sim.report("A", t=0.5, acc=0.1)
    sim.report("A", t=5, acc=0.2)  # jumps over rungs 1, 2 and 4
    rec = sched.recorded()
    assert rec[1] == {} and rec[2] == {} and rec[4] == {"A": 0.2}


def test_brackets_are_assigned_round_robin() -> None:
    sched = ASHAScheduler(metric="acc", mode="max", max_t=16, reduction_factor=2, brackets=2)
    sim = Simulator(sched)
    for tid in ["t0", "t1", "t2", "t3"]:
        sim.add(tid)
    assert [sched.bracket_of(t) for t in ["t0", "t1", "t2", "t3"]] == [0, 1, 0, 1]


def test_stop_last_trials_false_lets_trials_run_past_max_t() -> None:
    sim = _sim(max_t=2, stop_last_trials=False)
    assert sim.report("A", acc=1) is C
    assert sim.report("A", acc=1) is C
    assert sim.report("A", acc=1) is C


def test_stopped_trial_keeps_getting_stop() -> None:
    sim = _sim()
    sim.report("A", acc=0.9)
    assert sim.report("B", acc=0.1) is S
    sched = sim.scheduler
    assert sched.on_trial_result(sim.ctl, sim.ctl.get("B"), {"acc": 1.0, "training_iteration": 2}) is S


def test_metric_and_mode_from_search_properties() -> None:
    sched = ASHAScheduler()
    sched.set_search_properties("acc", "max")
    assert (sched.metric, sched.mode) == ("acc", "max")
    with pytest.raises(ValueError, match="mode must be 'min' or 'max'"):
        ASHAScheduler().set_search_properties("acc", "maximize")


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"mode": "maximise"}, "mode must be 'min' or 'max'"),
        ({"max_t": 0}, "max_t must be > 0"),
        ({"grace_period": 0}, "grace_period must be > 0"),
        ({"reduction_factor": 1}, "reduction_factor must be > 1"),
        ({"brackets": 0}, "brackets must be >= 1"),
        ({"brackets": 1.5}, "brackets must be a whole number"),
        ({"grace_period": 200}, "grace_period=200 exceeds max_t=100"),
        ({"time_attr": ""}, "time_attr"),
    ],
)
def test_bad_arguments_are_named(kwargs: dict[str, object], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        ASHAScheduler(**kwargs)  # type: ignore[arg-type]


def test_missing_metric_or_objective_is_a_clear_error() -> None:
    sim = _sim()
    with pytest.raises(MissingResultKeyError, match=r"no 'acc' entry \(keys present: \[.*'loss'"):
        sim.report("A", loss=1.0)
    bare = Simulator(ASHAScheduler())
    bare.add("A")
    bare.start("A")
    with pytest.raises(ValueError, match="metric and mode not set"):
        bare.report("A", acc=1.0)


SCRIPT = [(t, a) for a_row in [[0.5, 0.6, 0.4, 0.7], [0.55, 0.5, 0.45, 0.9], [0.6, 0.3, 0.2, 0.95]]
          for t, a in zip("ABCD", a_row, strict=True)] + [(t, 0.9) for _ in range(13) for t in "ABCD"]


def _play(sim: Simulator, steps: list[tuple[str, float]]) -> None:
    for tid, acc in steps:
        if sim.ctl.status(tid).value == "RUNNING":
            sim.report(tid, acc=acc)


def test_save_restore_continues_the_same_rungs() -> None:
    full = _sim()
    _play(full, SCRIPT)
    part = _sim()
    _play(part, SCRIPT[:9])
    state = pickle.loads(pickle.dumps(part.scheduler.save()))
    fresh = ASHAScheduler(metric="acc", mode="max", max_t=16, grace_period=1, reduction_factor=2)
    fresh.restore(state)
    part.scheduler = fresh
    _play(part, SCRIPT[9:])
    assert part.decisions == full.decisions
    with pytest.raises(ValueError, match="max_t=32 here but 16 in the saved state"):
        ASHAScheduler(metric="acc", mode="max", max_t=32, reduction_factor=2).restore(state)


def test_only_random_brackets_builds_and_saves_a_generator() -> None:
    """Without random_brackets nothing draws, so no generator is built or saved (it was half of a
    saved ASHA state); a state saved with one (before 2026-12-04) still restores."""
    plain = ASHAScheduler(metric="acc", mode="max", max_t=16, reduction_factor=2)
    assert plain._rng is None and "_rng" not in plain.save()["state"]
    drawn = ASHAScheduler(metric="acc", mode="max", max_t=16, reduction_factor=2, random_brackets=True, seed=3)
    assert "_rng" in drawn.save()["state"]
    old = pickle.loads(pickle.dumps(plain.save()))
    old["state"]["_rng"] = random.Random(1)  # what an older audition saved for every ASHA
    fresh = ASHAScheduler(metric="acc", mode="max", max_t=16, reduction_factor=2)
    fresh.restore(old)
    assert "_rng" not in fresh.save()["state"]
    with pytest.raises(ValueError, match="no _rng"):  # a drawing ASHA needs its generator back
        ASHAScheduler(metric="acc", mode="max", max_t=16, reduction_factor=2, random_brackets=True,
                      seed=3).restore({**plain.save(), "params": drawn.save()["params"]})


def test_save_copies_everything_including_the_generator() -> None:
    """save() is a deep copy (its generator too, copied the fast way): using what it returned
    changes nothing in the scheduler."""
    sched = ASHAScheduler(metric="acc", mode="max", max_t=16, reduction_factor=2, brackets=3,
                          random_brackets=True, seed=7)
    twin = ASHAScheduler(metric="acc", mode="max", max_t=16, reduction_factor=2, brackets=3,
                         random_brackets=True, seed=7)
    saved = sched.save()
    saved["state"]["_rng"].random()
    saved["state"]["_rungs"][0][0][1]["X"] = 1.0
    saved["state"]["_stopped"].add("X")
    assert [sched._assign(t) for t in "ABCDEFGH"] == [twin._assign(t) for t in "ABCDEFGH"]
    assert "X" not in sched.recorded(0)[1.0] and "X" not in sched._stopped


def test_the_host_pickles_what_save_returns_and_a_subclass_save_is_kept() -> None:
    """The scheduler host pickles the state without save()'s copy; restored, it is the same state.
    A subclass with its own save() is saved by that save()."""
    from actors._engine.scheduler_host import SchedulerHost
    from actors._legacy import loads
    from actors.messages import HookKind, SchedulerCall

    part = _sim()
    _play(part, SCRIPT[:9])
    host = SchedulerHost(part.scheduler, "acc", "max")
    blob = host.handle(SchedulerCall(1, HookKind.SAVE)).state
    assert blob is not None

    assert loads(blob) == {"scheduler": part.scheduler.save()}  # the plugin's state, not the host's mirror

    rand = ASHAScheduler(metric="acc", mode="max", max_t=16, reduction_factor=2, brackets=3,
                         random_brackets=True, seed=7)
    rand_blob = SchedulerHost(rand, "acc", "max").handle(SchedulerCall(1, HookKind.SAVE)).state

    def plain(saved: dict[str, Any]) -> dict[str, Any]:  # a generator compares by its state
        return {**saved, "state": {**saved["state"], "_rng": saved["state"]["_rng"].getstate()}}

    assert plain(loads(rand_blob or b"")["scheduler"]) == plain(rand.save())

    class Custom(ASHAScheduler):
        def save(self) -> dict[str, object]:
            return {**super().save(), "custom": True}

    custom = SchedulerHost(Custom(metric="acc", mode="max"), "acc", "max")
    assert loads(custom.handle(SchedulerCall(1, HookKind.SAVE)).state or b"")["scheduler"]["custom"] is True


# Recorded from Ray 2.60 (/work/rayvenv, a probe script): ASHAScheduler(metric="score", mode="max",
# max_t=9, grace_period=1, reduction_factor=3, brackets=3) after numpy.random.seed(0), six trials run
# one at a time (max_concurrent_trials=1), scores [5, 1, 3, 2, 4, 6][k] * iteration; trial 0 raises
# before its 4th result, FailureConfig(max_failures=1), no checkpoint (the retry reports from 1 again).
# Ray called on_trial_error, then on_trial_add again, which drew a new bracket; the old bracket's rungs
# kept trial 0's values, and its rungs in the new bracket were judged afresh.
_RAY_ADD_BRACKETS = [("k0", 0), ("k0", 1), ("k1", 0), ("k2", 0), ("k3", 0), ("k4", 0), ("k5", 0)]
_RAY_STOPPED_AT = {"k0": 9, "k1": 1, "k2": 1, "k3": 1, "k4": 3, "k5": 9}  # (k0: in its retry)
_RAY_RUNGS = [  # per bracket, rungs in descending milestone order, as Ray's _Bracket holds them
    [[9, {"k5": 54.0}], [3, {"k0": 15.0, "k4": 12.0, "k5": 18.0}],
     [1, {"k0": 5.0, "k1": 1.0, "k2": 3.0, "k3": 2.0, "k4": 4.0, "k5": 6.0}]],
    [[9, {"k0": 45.0}], [3, {"k0": 15.0}]],
    [[9, {}]],
]


def test_a_retried_trial_is_placed_in_a_bracket_again_as_ray_does() -> None:
    sched = ASHAScheduler(metric="score", mode="max", max_t=9, grace_period=1, reduction_factor=3,
                          brackets=3, random_brackets=True, seed=0)
    sim = Simulator(sched)
    added: list[tuple[str, int]] = []
    stopped: dict[str, int] = {}
    for k, factor in enumerate([5, 1, 3, 2, 4, 6]):
        tid = f"k{k}"
        sim.add(tid)
        added.append((tid, sched.bracket_of(tid)))
        sim.start(tid)
        for it in range(1, 10):
            if tid == "k0" and it == 4 and "k0" not in stopped and ("error", "k0") not in sim.hooks:
                sim.error(tid)  # the retry: on_trial_error, then on_trial_add, from iteration 1
                sim.add(tid)
                added.append((tid, sched.bracket_of(tid)))
                sim.start(tid)
                break
            if sim.report(tid, score=factor * it) is S:
                stopped[tid] = it
                break
        if tid == "k0":
            for it in range(1, 10):
                if sim.report(tid, score=factor * it) is S:
                    stopped[tid] = it
                    break
    assert added == _RAY_ADD_BRACKETS
    assert stopped == _RAY_STOPPED_AT
    got = [[[m, sched.recorded(b)[m]] for m in reversed(sched.milestones(b))] for b in range(3)]
    assert got == _RAY_RUNGS


def test_round_robin_gives_a_retried_trial_the_next_bracket() -> None:
    sched = ASHAScheduler(metric="acc", mode="max", max_t=16, reduction_factor=2, brackets=3)
    sim = Simulator(sched)
    for tid in ["t0", "t1"]:
        sim.add(tid)
    sim.start("t0")
    sim.report("t0", acc=1.0)
    sim.error("t0")
    sim.add("t0")
    sim.add("t2")
    assert [sched.bracket_of(t) for t in ["t0", "t1", "t2"]] == [2, 1, 0]
    assert sched.recorded(0)[1] == {"t0": 1.0}  # its earlier record stays, as in Ray


def test_debug_string_reads_as_rays() -> None:
    """Recorded from Ray 2.60 (``benchmarks/ray_oracle/record_api_semantics.py``): the STOPs decided, then
    each bracket's rungs, highest first, with the cutoff to beat (``mode="min"``: negated losses)."""
    from tests._fake_controller import FakeController
    from tests._ray_api import RAY_API

    ray = RAY_API["asha_debug_string"]
    asha = ASHAScheduler(metric="loss", mode="min", max_t=9, grace_period=1, reduction_factor=3, brackets=2,
                         random_brackets=True, seed=0)  # Ray's draw after numpy.random.seed(0)
    assert asha.debug_string() == ray["before"]
    ctl = FakeController()
    snaps = [ctl.add_trial(t) for t in "ABCD"]
    for snap in snaps:
        asha.on_trial_add(ctl, snap)
    decisions, stopped = [], set()
    for it in range(1, 10):
        for n, snap in enumerate(snaps):
            if snap.trial_id not in stopped:
                d = asha.on_trial_result(ctl, snap, {"training_iteration": it, "loss": (n + 1) / it + 0.1 * n})
                decisions.append(f"{snap.trial_id}{it}:{d}")
                if d == "STOP":
                    stopped.add(snap.trial_id)
    assert decisions == ray["decisions"]
    assert asha.debug_string() == ray["after"]


def test_the_stop_count_survives_a_restore_and_states_saved_before_it() -> None:
    sim = _sim()
    _play(sim, SCRIPT[:9])
    stops = sum(d is S for _, _, d in sim.decisions)
    assert stops and f"num_stopped={stops}" in sim.scheduler.debug_string()
    state = sim.scheduler.save()
    again = ASHAScheduler(metric="acc", mode="max", max_t=16, grace_period=1, reduction_factor=2)
    again.restore(state)
    assert again.debug_string() == sim.scheduler.debug_string()
    del state["state"]["_num_stopped"]  # as saved before the count was kept: one STOP per stopped trial
    older = ASHAScheduler(metric="acc", mode="max", max_t=16, grace_period=1, reduction_factor=2)
    older.restore(state)
    assert f"num_stopped={len(state['state']['_stopped'])}" in older.debug_string()
