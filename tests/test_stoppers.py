"""Stoppers: each rule, combination, the stop= normaliser, errors and save/restore."""

from __future__ import annotations

import datetime
import logging
import math
import pickle
from typing import Any

import pytest

from actors.schedulers._common import MissingResultKeyError
from actors.stoppers import (
    CombinedStopper,
    DictStopper,
    ExperimentPlateauStopper,
    FunctionStopper,
    MaximumIterationStopper,
    Stopper,
    TimeoutStopper,
    TrialPlateauStopper,
    make_stopper,
)


def _roundtrip(stopper: Stopper, fresh: Stopper) -> Stopper:
    fresh.restore(pickle.loads(pickle.dumps(stopper.save())))
    return fresh


# ---------------------------------------------------------------- iterations


def test_maximum_iteration_counts_results_not_training_iteration() -> None:
    # Recorded from Ray 2.60: MaximumIterationStopper(3) fed training_iteration 1, 2, 1, 2, 3 for
    # trial "a" (a retry from scratch), then 5 for "b": [False, False, True, True, True] and False.
    s = MaximumIterationStopper(3)
    assert [s("a", {"training_iteration": i}) for i in (1, 2, 1, 2, 3)] == [False, False, True, True, True]
    assert s("b", {"training_iteration": 5}) is False  # its first result, per trial


def test_maximum_iteration_counts_results_without_training_iteration() -> None:
    s = MaximumIterationStopper(2)
    assert [s("a", {}), s("a", {})] == [False, True]
    r = _roundtrip(s, MaximumIterationStopper(2))
    assert r("a", {}) is True
    with pytest.raises(ValueError, match="max_iter must be >= 1"):
        MaximumIterationStopper(0)


# ---------------------------------------------------------------- timeout


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def test_timeout_counts_from_first_use_with_injected_clock() -> None:
    clock = Clock(100.0)
    s = TimeoutStopper(10, clock=clock)
    clock.now = 500.0  # construction time does not count
    assert s.stop_all() is False
    clock.now = 505.0
    assert s("a", {}) is False  # never stops a single trial
    assert s.stop_all() is False
    clock.now = 510.0
    assert s.stop_all() is True


def test_timeout_accepts_timedelta_and_resumes_with_the_remaining_budget() -> None:
    clock = Clock(0.0)
    s = TimeoutStopper(datetime.timedelta(minutes=1), clock=clock)
    assert s.timeout == 60.0
    s.stop_all()
    clock.now = 45.0
    state = pickle.loads(pickle.dumps(s.save()))
    later = Clock(10_000.0)
    r = TimeoutStopper(60, clock=later)
    r.restore(state)
    assert r.stop_all() is False
    later.now += 14.0
    assert r.stop_all() is False
    later.now += 1.0
    assert r.stop_all() is True


@pytest.mark.parametrize("bad", [0, -5, float("inf"), "10"])
def test_timeout_rejects_bad_values(bad: Any) -> None:
    with pytest.raises(ValueError, match="timeout"):
        TimeoutStopper(bad)


# ---------------------------------------------------------------- trial plateau


def test_trial_plateau() -> None:
    s = TrialPlateauStopper("loss", std=0.01, num_results=3, grace_period=3)
    out = [s("a", {"loss": v}) for v in (1.0, 0.5, 0.5, 0.5)]
    assert out == [False, False, False, True]  # window [1, .5, .5] spreads; [.5, .5, .5] does not
    assert s("b", {"loss": 0.5}) is False  # other trials keep their own window


def test_trial_plateau_decides_as_ray() -> None:
    # Recorded from Ray 2.60 (TrialPlateauStopper fed these values for one trial, printing each
    # answer): numpy's std must be strictly below std (std([0, .01]) is exactly .005), a NaN in the
    # window stops nothing (no error), std=0 never stops, the threshold compares negative values.
    nan = float("nan")
    s = TrialPlateauStopper("m", std=0.005, num_results=2, grace_period=1)
    assert [s("a", {"m": v}) for v in [0, 0.01, 0, 0.01, 0.01]] == [False, False, False, False, True]
    s = TrialPlateauStopper("m", std=0.01, num_results=3, grace_period=0)
    assert [s("a", {"m": v}) for v in [1, nan, 1, 1, 1, 1]] == [False, False, False, False, True, True]
    s = TrialPlateauStopper("m", std=0.0, num_results=2, grace_period=0)
    assert [s("a", {"m": v}) for v in [3, 3, 3]] == [False, False, False]
    s = TrialPlateauStopper("m", std=0.1, num_results=2, grace_period=0, metric_threshold=-1.0, mode="min")
    assert [s("a", {"m": v}) for v in [-0.5, -0.5, -2, -2, nan, -2, -2]] == [
        False, False, False, True, False, False, True]


def test_trial_plateau_zero_threshold_without_mode_is_ignored_as_ray(caplog: Any) -> None:
    # Recorded from Ray 2.60: TrialPlateauStopper("m", metric_threshold=0.0) (no mode) is accepted
    # (Ray checks `if metric_threshold:`) and never compares it: 5, 5, 5, 5, 5 -> stops at the 4th.
    with caplog.at_level(logging.WARNING, logger="audition"):
        s = TrialPlateauStopper("m", metric_threshold=0.0)
    assert "metric_threshold=0 without mode is ignored" in caplog.text
    assert [s("a", {"m": 5}) for _ in range(5)] == [False, False, False, True, True]
    assert [s("b", {}) for _ in range(4)] == [False] * 4  # nothing to compare: no error either


def test_trial_plateau_grace_period_and_threshold() -> None:
    s = TrialPlateauStopper("loss", num_results=2, grace_period=4)
    assert [s("a", {"loss": 1.0}) for _ in range(4)] == [False, False, False, True]
    t = TrialPlateauStopper("loss", num_results=2, grace_period=0, metric_threshold=0.1, mode="min")
    assert [t("a", {"loss": 0.5}) for _ in range(3)] == [False, False, False]  # flat but not good enough
    assert [t("b", {"loss": 0.05}) for _ in range(2)] == [False, True]
    u = TrialPlateauStopper("acc", num_results=2, grace_period=0, metric_threshold=0.9, mode="max")
    assert [u("a", {"acc": 0.5}), u("a", {"acc": 0.5}), u("b", {"acc": 0.95}), u("b", {"acc": 0.95})] == [
        False, False, False, True]


def test_trial_plateau_errors_and_restore() -> None:
    with pytest.raises(ValueError, match="metric_threshold needs mode"):
        TrialPlateauStopper("loss", metric_threshold=0.1)
    with pytest.raises(ValueError, match="mode must be 'min' or 'max'"):
        TrialPlateauStopper("loss", mode="lowest")
    s = TrialPlateauStopper("loss", num_results=2, grace_period=2)
    s("a", {"loss": 0.3})
    r = _roundtrip(s, TrialPlateauStopper("loss", num_results=2, grace_period=2))
    assert r("a", {"loss": 0.3}) is True


def test_trial_plateau_result_without_the_metric_as_ray() -> None:
    # Recorded from Ray 2.60 (TrialPlateauStopper fed results with and without "m", printing each
    # answer): a missing value counts and holds its window place, so that window stops nothing;
    # with metric_threshold, Ray fails once the threshold is compared (TypeError), audition too.
    s = TrialPlateauStopper("m", std=0.1, num_results=2, grace_period=1)
    got = [s("a", {} if v is None else {"m": v}) for v in [1, None, 1, 1, None, 1, 1]]
    assert got == [False, False, False, True, False, False, True]
    t = TrialPlateauStopper("m", std=0.1, num_results=2, grace_period=3, metric_threshold=2.0, mode="min")
    assert [t("a", {} if v is None else {"m": v}) for v in [1, None, 1, 1]] == [False, False, False, True]
    with pytest.raises(MissingResultKeyError, match=r"no 'm' to compare with metric_threshold=2\.0 \(keys present"):
        t("a", {"acc": 1})


# ---------------------------------------------------------------- experiment plateau


def test_experiment_plateau_with_patience() -> None:
    s = ExperimentPlateauStopper("loss", std=0.001, top=3, mode="min", patience=1)
    assert s("a", {"loss": 1.0}) is False
    assert s("b", {"loss": 0.5}) is False
    assert s("a", {"loss": 0.5}) is False  # top 3 = [.5, .5, 1.0]: spread
    # Recorded from Ray 2.60 (this sequence): [False, False, False, True, True], stop_all() True.
    assert s("c", {"loss": 0.5}) is True  # top 3 = [.5, .5, .5]: plateau #1 >= patience 1
    assert s.stop_all() is True
    assert s("b", {"loss": 0.7}) is True  # still [.5, .5, .5]: plateau #2
    assert s.stop_all() is True


def test_experiment_plateau_patience_and_nan_as_ray() -> None:
    # Recorded from Ray 2.60 (ExperimentPlateauStopper fed these values for one trial, printing each
    # answer): patience=2 stops at the second plateaued result; a NaN sorts where Python's sorted()
    # puts it and, kept among the top values, ends the plateau (numpy's std of it is NaN).
    nan = float("nan")
    s = ExperimentPlateauStopper("m", std=0.01, top=3, mode="max", patience=2)
    got = [s("a", {"m": v}) for v in [1, 2, 2, 2, 2, 2, nan, 2, 2, 3, 3, 3, 3]]
    assert got == [False, False, False, False, True, True, False, False, False, False, False, False, True]
    t = ExperimentPlateauStopper("m", std=0.01, top=3, mode="min", patience=0)
    assert [t("a", {"m": v}) for v in [nan, 1, 1, 1, 1, nan, 1]] == [False] * 7
    assert math.isnan(t._best[0]) and t._best[1:] == [1.0, 1.0]  # Ray's top values: [nan, 1, 1]


def test_experiment_plateau_max_mode_resets_on_change() -> None:
    s = ExperimentPlateauStopper("acc", top=2, mode="max", patience=0)
    assert s("a", {"acc": 0.9}) is False
    assert s("b", {"acc": 0.95}) is False  # [.95, .9]: spread
    assert s("c", {"acc": 0.95}) is True  # [.95, .95]: plateau, patience 0
    r = _roundtrip(s, ExperimentPlateauStopper("acc", top=2, mode="max"))
    assert r.stop_all() is True
    with pytest.raises(ValueError, match="mode is required"):
        ExperimentPlateauStopper("acc", mode=None)  # type: ignore[arg-type]
    # Ray 2.60 (recorded) refuses top=0, 1, 2.5 ("Top results to consider must be a positive integer greater
    # than one.") and std=0, -1 ("The standard deviation must be a strictly positive float number.")
    for top in (0, 1):
        with pytest.raises(ValueError, match=f"top must be > 1, got {top}"):
            ExperimentPlateauStopper("acc", top=top)
    with pytest.raises(ValueError, match="top must be a whole number"):
        ExperimentPlateauStopper("acc", top=2.5)  # type: ignore[arg-type]
    for std in (0, 0.0, -1):
        with pytest.raises(ValueError, match="std must be > 0"):
            ExperimentPlateauStopper("acc", std=std)


# ---------------------------------------------------------------- combined / function / dict


class Recorder(Stopper):
    def __init__(self, stop_after: int, stop_everything: bool = False) -> None:
        self.seen: list[int] = []
        self.stop_after = stop_after
        self.stop_everything = stop_everything

    def __call__(self, trial_id: str, result: dict[str, Any]) -> bool:
        self.seen.append(result["i"])
        return len(self.seen) >= self.stop_after

    def stop_all(self) -> bool:
        return self.stop_everything

    def save(self) -> dict[str, Any]:
        return {"seen": list(self.seen)}

    def restore(self, state: dict[str, Any]) -> None:
        self.seen = list(state["seen"])


def test_combined_stopper_asks_in_order_until_one_stops() -> None:
    first, second = Recorder(1), Recorder(3)
    c = CombinedStopper(first, second)
    assert [c("a", {"i": i}) for i in range(3)] == [True, True, True]
    assert second.seen == []  # short-circuited by the first one's "stop", as Ray's any(...)
    assert c.stop_all() is False
    assert CombinedStopper(Recorder(9), Recorder(9, stop_everything=True)).stop_all() is True
    r = _roundtrip(c, CombinedStopper(Recorder(1), Recorder(3)))
    assert [s.seen for s in r.stoppers] == [[0, 1, 2], []]  # type: ignore[attr-defined]


def test_combined_stopper_decides_as_ray() -> None:
    # Recorded from Ray 2.60 (CombinedStopper fed these results directly, printing each answer): the
    # stoppers after one that said stop do not see that result.
    c = CombinedStopper(MaximumIterationStopper(2), ExperimentPlateauStopper("m", top=2, std=0.001, mode="max"))
    seq = [("a", 1), ("a", 5), ("b", 3), ("b", 5), ("c", 4), ("c", 4), ("d", 5)]
    assert [c(t, {"m": v}) for t, v in seq] == [False, True, False, True, False, True, False]
    assert c.stop_all() is False
    c = CombinedStopper(TrialPlateauStopper("m", std=0.5, num_results=2, grace_period=1), MaximumIterationStopper(3))
    assert [c("a", {"m": v}) for v in [1, 1, 5, 9, 9]] == [False, True, False, True, True]
    with pytest.raises(ValueError, match="holds 2 stoppers but this one has 1"):
        CombinedStopper(Recorder(1)).restore(c.save())
    with pytest.raises(TypeError, match="argument 1 is dict, not a Stopper"):
        CombinedStopper(Recorder(1), {"x": 1})  # type: ignore[arg-type]


def test_function_stopper() -> None:
    s = FunctionStopper(lambda trial_id, result: result["loss"] < 0.1)
    assert (s("a", {"loss": 0.5}), s("a", {"loss": 0.05}), s.stop_all()) == (False, True, False)
    with pytest.raises(TypeError, match="must accept two arguments"):
        FunctionStopper(lambda result: True)  # type: ignore[arg-type,misc]
    with pytest.raises(TypeError, match="expected a function"):
        FunctionStopper(3)  # type: ignore[arg-type]
    # Ray 2.60's signature: FunctionStopper(function), and its classmethod is_valid_function
    assert FunctionStopper(function=lambda trial_id, result: True)("a", {})
    assert FunctionStopper.is_valid_function(lambda t, r: True)
    assert not FunctionStopper.is_valid_function(s) and not FunctionStopper.is_valid_function(3)

    class HasStopAll:
        def __call__(self, trial_id: str, result: dict[str, Any]) -> bool:
            return False

        def stop_all(self) -> bool:
            return True

    with pytest.raises(ValueError, match=r"not an actors\.Stopper subclass"):
        FunctionStopper.is_valid_function(HasStopAll())
    with pytest.raises(ValueError, match="has stop_all but"):  # stop=: Ray 2.60 raises ValueError too (recorded)
        make_stopper(HasStopAll())


def test_dict_stopper_thresholds_are_reached_with_greater_or_equal() -> None:
    s = DictStopper({"training_iteration": 3, "acc": 0.9})
    assert s("a", {"training_iteration": 1, "acc": 0.5}) is False
    assert s("a", {"training_iteration": 2, "acc": 0.9}) is True  # acc reached
    assert s("a", {"training_iteration": 3, "acc": 0.1}) is True  # iterations reached
    nested = DictStopper({"eval/acc": 0.8})
    assert nested("a", {"eval": {"acc": 0.85}}) is True


def test_dict_stopper_passes_over_a_missing_key_with_one_warning(caplog) -> None:
    # recorded from Ray 2.60 (Trial.should_stop): a criterion missing from a result is skipped for it,
    # with a warning ("Stopping criterion 'a' not found in result dict! ..."); the others still count
    s = DictStopper({"acc": 0.9, "training_iteration": 3})
    with caplog.at_level(logging.WARNING, logger="audition"):
        assert s("a", {"loss": 1.0, "training_iteration": 1}) is False
        assert s("b", {"loss": 1.0, "training_iteration": 2}) is False
        assert s("a", {"loss": 1.0, "training_iteration": 3}) is True
        assert s("a", {"acc": 0.95, "training_iteration": 1}) is True
    warned = [r.getMessage() for r in caplog.records if "stop criterion" in r.getMessage()]
    assert len(warned) == 1 and "'acc' is not in the result of trial a (keys present: ['loss'" in warned[0]
    restored = pickle.loads(pickle.dumps(s))
    assert restored("c", {"training_iteration": 1}) is False


def test_dict_stopper_errors_name_the_problem() -> None:
    s = DictStopper({"acc": 0.9})
    with pytest.raises(TypeError, match="reported str 'high'"):
        s("a", {"acc": "high"})
    with pytest.raises(TypeError, match="threshold for 'acc' must be a number"):
        DictStopper({"acc": "0.9"})


def test_make_stopper_normalises_every_form() -> None:
    assert make_stopper(None) is None
    assert make_stopper({}) is None
    assert isinstance(make_stopper({"training_iteration": 5}), DictStopper)
    fs = make_stopper(lambda trial_id, result: False)
    assert isinstance(fs, FunctionStopper)
    m = MaximumIterationStopper(2)
    assert make_stopper(m) is m
    with pytest.raises(TypeError, match=r"is a class; pass an instance, e\.g\. stop=MaximumIterationStopper"):
        make_stopper(MaximumIterationStopper)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="stop must be a dict"):
        make_stopper(10)  # type: ignore[arg-type]


def test_stateless_stoppers_save_empty_state() -> None:
    assert DictStopper({"a": 1}).save() == {}
    with pytest.raises(TypeError, match="expected the dict returned by save"):
        DictStopper({"a": 1}).restore([])  # type: ignore[arg-type]
