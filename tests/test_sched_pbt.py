"""PBT: quantiles, exploit/explore with a fixed seed, multiplexing, synch mode, save/restore."""

from __future__ import annotations

import pickle
import random
from typing import Any

import pytest

from actors._engine.reducer import Decision
from actors._engine.trial import TrialStatus
from actors.schedulers import PopulationBasedTraining
from actors.schedulers._pbt_explore import explore
from tests._fake_controller import Simulator

C, P = Decision.CONTINUE, Decision.PAUSE


class Span:
    """A minimal search domain: anything with ``sample(rng)`` (plus optional bounds)."""

    def __init__(self, lower: float, upper: float) -> None:
        self.lower, self.upper = lower, upper

    def sample(self, rng: random.Random) -> float:
        return rng.uniform(self.lower, self.upper)


ACC = {"t0": 0.1, "t1": 0.2, "t2": 0.3, "t3": 0.4}


def _pbt(**kw: Any) -> PopulationBasedTraining:
    args: dict[str, Any] = {
        "time_attr": "training_iteration", "metric": "acc", "mode": "max", "perturbation_interval": 2,
        "hyperparam_mutations": {"lr": Span(0.0, 10.0)}, "perturbation_factors": (2.0,),
        "resample_probability": 0.0, "seed": 0,
    }
    args.update(kw)
    return PopulationBasedTraining(**args)


def _population(sched: PopulationBasedTraining) -> Simulator:
    sim = Simulator(sched)
    for i, tid in enumerate(ACC):
        sim.add(tid, {"lr": float(i + 1), "batch": 32})
        sim.start(tid)
    return sim


def _round(sim: Simulator, ids: list[str] | None = None) -> list[Decision]:
    return [sim.report(t, acc=ACC[t]) for t in (ids or list(ACC))]


def test_top_is_checkpointed_and_bottom_is_cloned_from_it() -> None:
    sim = _population(_pbt())
    assert _round(sim) == [C] * 4  # iteration 1: before the interval
    # iteration 2: quantiles grow with the scored pool; with 2+ scored trials k = 1.
    # t0 alone: no quantiles.  t1: pool {t0, t1} -> top t1.  t2: top t2.  t3: top t3.
    assert _round(sim) == [C] * 4
    assert [c[1] for c in sim.ctl.calls_of("checkpoint")] == ["t1", "t2", "t3"]
    assert sim.ctl.calls_of("clone") == []
    _round(sim)  # iteration 3
    # iteration 4: t0 is the bottom quarter, t3 the top (checkpointed at 2): exploit + explore.
    assert sim.report("t0", acc=0.1) is C  # the clone restarts it, no pause
    (clone,) = sim.ctl.calls_of("clone")
    _, tid, source, new_config, info = clone
    assert (tid, source) == ("t0", "t3")
    assert new_config == {"lr": 8.0, "batch": 32}  # t3's lr 4.0 times the only factor, 2.0
    assert info == {"source": "t3", "trial_id": "t0", "old_config": {"lr": 1.0, "batch": 32},
                    "source_config": {"lr": 4.0, "batch": 32}, "new_config": new_config, "time": 4.0}
    assert sim.ctl.get("t0").config == new_config
    assert sim.scheduler.exploit_log == [info]  # type: ignore[attr-defined]


def test_a_finished_trial_is_never_a_clone_source() -> None:
    """As in Ray Tune, finished trials are not ranked: cloning one's final checkpoint would leave
    the clone nothing to do (it would end at once, at its source's last step)."""
    sim = _population(_pbt())
    _round(sim)
    _round(sim)  # iteration 2: t1, t2, t3 checkpointed
    _round(sim)
    sim.complete("t3")  # the best trial finishes
    assert sim.report("t0", acc=0.1) is C  # iteration 4: bottom of {t0, t1, t2}, top is t2
    (clone,) = sim.ctl.calls_of("clone")
    assert clone[1:3] == ("t0", "t2")


def test_no_exploit_without_a_checkpointed_source() -> None:
    sim = _population(_pbt(perturbation_interval=1))
    sim.report("t3", acc=0.4)  # alone in the scored pool: no quantiles, so no checkpoint
    sim.report("t0", acc=0.1)  # bottom of {t3, t0}, but t3 has no checkpoint to copy
    assert sim.ctl.calls_of("clone") == [] and sim.ctl.calls_of("checkpoint") == []
    sim.report("t3", acc=0.4)  # t=2: top of {t3, t0} -> checkpointed
    sim.report("t0", acc=0.1)  # now there is something to copy
    assert [c[1] for c in sim.ctl.calls_of("checkpoint")] == ["t3"]
    assert [(c[1], c[2]) for c in sim.ctl.calls_of("clone")] == [("t0", "t3")]


def test_burn_in_delays_the_first_perturbation() -> None:
    sim = _population(_pbt(burn_in_period=3))
    _round(sim)
    _round(sim)
    assert sim.ctl.calls_of("checkpoint") == []  # t=2 would be a perturbation point but is < burn-in
    _round(sim)  # t=3: past burn-in and 3 - 0 >= 2 -> t1, t2, t3 each rank top as they arrive
    assert [c[1] for c in sim.ctl.calls_of("checkpoint")] == ["t1", "t2", "t3"]
    _round(sim)  # t=4: only 1 since the last perturbation -> nothing new
    assert len(sim.ctl.calls_of("checkpoint")) == 3 and sim.ctl.calls_of("clone") == []


def test_a_trial_yields_at_its_perturbation_point_when_others_wait() -> None:
    sched = _pbt()
    sim = Simulator(sched)
    for tid in ("t0", "t1", "t2"):
        sim.add(tid, {"lr": 1.0})
    sim.start("t0")
    sim.start("t1")
    assert [sim.report("t0", acc=0.1), sim.report("t0", acc=0.1)] == [C, P]  # t2 is pending
    assert sim.choose() == "t2"  # never-run trials first
    sim.report("t1", acc=0.2)
    assert sim.report("t1", acc=0.2) is P  # t0 is paused, waiting for a slot
    assert sim.choose() == "t0"


def test_explore_rules() -> None:
    rng = random.Random(1)
    cfg = {"opt": {"momentum": 0.9}, "act": "relu", "lr": 0.5, "layers": 4}
    muts = {"opt": {"momentum": [0.5, 0.9, 0.99]}, "act": ["relu", "tanh"], "lr": Span(0.0, 0.6),
            "layers": lambda: 7, "new": [1, 2]}
    for _ in range(50):
        out = explore(cfg, muts, rng, 0.0, (1.2, 0.8))
        assert out["opt"]["momentum"] in (0.5, 0.99)  # a neighbour of 0.9
        assert out["act"] in ("relu", "tanh")
        assert out["lr"] in (0.4, 0.6)  # 0.5 * 0.8 or min(0.5 * 1.2, upper=0.6)
        assert out["layers"] in (5, 3)  # round(4 * 1.2), round(4 * 0.8): ints stay ints
        assert out["new"] in (1, 2)  # missing keys are drawn afresh
    assert cfg == {"opt": {"momentum": 0.9}, "act": "relu", "lr": 0.5, "layers": 4}  # untouched
    fresh = explore(cfg, muts, rng, 1.0, (1.2, 0.8))
    assert fresh["layers"] == 7 and 0.0 <= fresh["lr"] <= 0.6
    custom = explore(cfg, None, rng, 0.0, (2.0,), custom_explore_fn=lambda c: {**c, "lr": -1})
    assert custom["lr"] == -1
    with pytest.raises(TypeError, match="custom_explore_fn must return the new config dict"):
        explore(cfg, None, rng, 0.0, (2.0,), custom_explore_fn=lambda c: None)  # type: ignore[arg-type,return-value]


def test_search_domains_are_accepted() -> None:
    domain = pytest.importorskip("actors.search._domain")
    rng = random.Random(3)
    muts = {"lr": domain.Float(1e-4, 1e-1, log=True), "units": domain.Integer(8, 65),
            "act": domain.Categorical(("relu", "tanh", "gelu"))}
    out = explore({"lr": 1e-2, "units": 32, "act": "tanh"}, muts, rng, 0.0, (2.0,))
    assert out == {"lr": 2e-2, "units": 64, "act": out["act"]} and out["act"] in ("relu", "gelu")
    assert explore({"units": 60}, muts, rng, 0.0, (2.0,))["units"] == 64  # clipped to the domain's high


def test_same_seed_same_choices() -> None:
    def run(seed: int) -> list[dict[str, Any]]:
        muts = {"lr": [0.001, 0.01, 0.1, 1.0], "wd": Span(0, 1)}
        sched = _pbt(hyperparam_mutations=muts, resample_probability=0.5, perturbation_factors=(1.2, 0.8),
                     seed=seed, perturbation_interval=1, quantile_fraction=0.5)
        sim = Simulator(sched)
        for i in range(6):
            sim.add(f"t{i}", {"lr": 0.01, "wd": 0.5})
        sim.run(lambda tid, it: {"acc": (int(tid[1:]) * 7 % 6) / 6 + it / 100}, slots=3, max_iter=12)
        return sched.exploit_log

    assert run(5) == run(5)
    assert run(5) != run(6)
    assert len(run(5)) > 0


def test_synch_pauses_everyone_then_exploits_and_resumes_all() -> None:
    sim = _population(_pbt(synch=True))
    assert _round(sim) == [C] * 4
    assert _round(sim, ["t0", "t1", "t2"]) == [P] * 3  # parked at the sync point t=2
    assert all(sim.ctl.status(t) is TrialStatus.PAUSED for t in ("t0", "t1", "t2"))
    assert sim.scheduler.choose_trial_to_run(sim.ctl) is None  # parked trials wait for t3
    assert sim.ctl.calls_of("clone") == [] and sim.ctl.calls_of("resume") == []
    # The last arrival triggers the sync at once.  Its own pause is still in flight, so it can
    # be copied only if it saved a checkpoint with this result (the usual PBT trainable does).
    assert sim.report("t3", acc=0.4, checkpoint=True) is P
    (clone,) = sim.ctl.calls_of("clone")
    assert (clone[1], clone[2], clone[3]) == ("t0", "t3", {"lr": 8.0, "batch": 32})
    assert sorted(c[1] for c in sim.ctl.calls_of("resume")) == ["t0", "t1", "t2", "t3"]
    assert all(sim.ctl.status(t) is TrialStatus.PENDING for t in ACC)  # t3 once its pause lands
    for _ in range(4):
        sim.choose()
    assert _round(sim) == [C] * 4  # t=3
    assert _round(sim) == [P] * 4  # next sync at t=4


def test_synch_with_fewer_slots_than_trials_strands_no_one() -> None:
    sched = _pbt(synch=True, perturbation_interval=3, quantile_fraction=0.5)
    sim = Simulator(sched)
    for i in range(7):
        sim.add(f"t{i}", {"lr": 1.0, "batch": 8})
    sim.run(lambda tid, it: {"acc": int(tid[1:]) / 10}, slots=2, max_iter=10)
    assert all(s.status is TrialStatus.TERMINATED for s in sim.ctl.get_trials())
    assert len(sched.exploit_log) == 3 * 3  # 3 syncs (t=3, 6, 9) x bottom 3 of 7
    assert {e["time"] for e in sched.exploit_log} == {3.0, 6.0, 9.0}


def test_synch_trial_ending_early_releases_the_others() -> None:
    sim = _population(_pbt(synch=True))
    _round(sim)
    _round(sim, ["t0", "t1", "t2"])  # parked
    sim.error("t3")  # never reaches the sync point
    assert sorted(c[1] for c in sim.ctl.calls_of("resume")) == ["t0", "t1", "t2"]


@pytest.mark.parametrize(
    ("kwargs", "exc", "match"),
    [
        ({"hyperparam_mutations": None}, ValueError, "give hyperparam_mutations"),
        ({"hyperparam_mutations": {"lr": 3}}, TypeError, r"hyperparam_mutations\['lr'\] must be a list"),
        ({"hyperparam_mutations": {"lr": []}}, ValueError, "empty list"),
        ({"quantile_fraction": 0.7}, ValueError, "quantile_fraction must be between 0 and 0.5"),
        ({"resample_probability": 2}, ValueError, "resample_probability must be between 0 and 1"),
        ({"perturbation_interval": 0}, ValueError, "perturbation_interval must be > 0"),
        ({"perturbation_factors": ()}, ValueError, "perturbation_factors must be a non-empty"),
        ({"mode": "high"}, ValueError, "mode must be 'min' or 'max'"),
        ({"seed": "x"}, TypeError, "seed must be an int"),
    ],
)
def test_bad_arguments(kwargs: dict[str, Any], exc: type[Exception], match: str) -> None:
    with pytest.raises(exc, match=match):
        _pbt(**kwargs)


def test_require_attrs_false_ignores_incomplete_results() -> None:
    sim = _population(_pbt(require_attrs=False))
    assert sim.report("t0", other=1) is C
    strict = _population(_pbt())
    with pytest.raises(KeyError, match="no 'acc' entry"):
        strict.report("t0", other=1)


def _stream(sim: Simulator, n: int) -> None:
    for _ in range(n):
        sim.fill(2)
        running = sim.running()
        if not running:
            return
        tid = running[0]
        it = sim.iteration[tid] + 1
        sim.report(tid, done=it >= 9, acc=(int(tid[1:]) * 5 % 7) / 7 + it / 50)


@pytest.mark.parametrize("synch", [False, True])
def test_save_restore_mid_stream(synch: bool) -> None:
    def fresh() -> Simulator:
        sched = _pbt(hyperparam_mutations={"lr": [1, 2, 3, 4]}, resample_probability=0.5, synch=synch,
                     quantile_fraction=0.5, seed=11)
        sim = Simulator(sched)
        for i in range(5):
            sim.add(f"t{i}", {"lr": 1 + i % 4})
        return sim

    full = fresh()
    _stream(full, 10_000)
    part = fresh()
    _stream(part, 17)
    state = pickle.loads(pickle.dumps(part.scheduler.save()))
    restored = _pbt(hyperparam_mutations={"lr": [1, 2, 3, 4]}, resample_probability=0.5, synch=synch,
                    quantile_fraction=0.25, seed=11)
    with pytest.raises(ValueError, match=r"quantile_fraction=0\.25 here but 0\.5"):
        restored.restore(state)
    restored = _pbt(hyperparam_mutations={"lr": [1, 2, 3, 4]}, resample_probability=0.5, synch=synch,
                    quantile_fraction=0.5, seed=11)
    restored.restore(state)
    part.scheduler = restored
    _stream(part, 10_000)
    assert part.decisions == full.decisions
    assert part.ctl.calls == full.ctl.calls
    assert restored.exploit_log == full.scheduler.exploit_log  # type: ignore[attr-defined]
    assert len(restored.exploit_log) > 0


def test_a_retried_trial_is_a_live_member_again() -> None:
    """Ray requeues a retried trial with on_trial_error then on_trial_add; Ray's PBT ignores the
    error and starts the trial's record afresh when it is added. Here on_trial_error ends the
    member, so the add must revive it: else it is never ranked again, never exploited."""
    sim = _population(_pbt())
    _round(sim)
    _round(sim)  # iteration 2: scored
    snap = sim.ctl.set_status("t0", TrialStatus.PENDING)
    sim.scheduler.on_trial_error(sim.ctl, snap)
    sim.scheduler.on_trial_add(sim.ctl, snap)
    member = sim.scheduler._members["t0"]  # type: ignore[attr-defined]
    assert not member.ended and member.score is None and member.last_perturbation == 0.0
    assert list(sim.scheduler._members) == list(ACC)  # type: ignore[attr-defined]  # its place kept
