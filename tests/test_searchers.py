"""Searcher contract: BasicVariantGenerator save/restore, ConcurrencyLimiter and Repeater."""

from __future__ import annotations

import pickle
from typing import Any

import cloudpickle
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actors.search import (
    BasicVariantGenerator,
    ConcurrencyLimiter,
    Repeater,
    Searcher,
    SearcherSignal,
    choice,
    grid_search,
    loguniform,
    randint,
    sample_from,
    uniform,
)
from actors.search._searcher import Suggestion

SPACE: dict[str, Any] = {
    "a": grid_search([1, 2, 3]),
    "lr": loguniform(1e-4, 1e-1),
    "n": randint(0, 100),
    "c": choice(["x", "y"]),
    "d": sample_from(lambda spec: spec.config.lr * spec.config.a),
}


class Recorder(Searcher):
    """A scripted inner searcher: hands out ``{"i": k}`` ``limit`` times and records every call."""

    def __init__(self, limit: int = 100, metric: str | None = "loss", mode: str | None = "min") -> None:
        super().__init__(metric, mode)
        self.limit = limit
        self.count = 0
        self.calls: list[tuple[Any, ...]] = []
        self.pause = False

    def suggest(self, trial_id: str) -> Suggestion:
        if self.pause:
            return None
        if self.count >= self.limit:
            return Searcher.FINISHED
        self.count += 1
        self.calls.append(("suggest", trial_id))
        return {"i": self.count - 1}

    def on_trial_result(self, trial_id: str, result: dict[str, Any]) -> None:
        self.calls.append(("result", trial_id, result))

    def on_trial_complete(
        self, trial_id: str, result: dict[str, Any] | None = None, error: bool = False
    ) -> None:
        self.calls.append(("complete", trial_id, result, error))

    def save(self) -> dict[str, Any]:
        return {"count": self.count, "calls": list(self.calls)}

    def restore(self, state: dict[str, Any]) -> None:
        self.count, self.calls = state["count"], list(state["calls"])


def _roundtrip(state: dict[str, Any]) -> dict[str, Any]:
    """What the storage layer does with a snapshot."""
    restored: dict[str, Any] = cloudpickle.loads(cloudpickle.dumps(state))
    return restored


# --- base contract ---------------------------------------------------------------------------------


def test_finished_sentinel_survives_pickling() -> None:
    assert pickle.loads(pickle.dumps(Searcher.FINISHED)) is Searcher.FINISHED
    assert Searcher.FINISHED is SearcherSignal.FINISHED


def test_mode_and_metric_are_validated() -> None:
    with pytest.raises(ValueError, match="mode must be 'min' or 'max', got 'minimize'"):
        BasicVariantGenerator(param_space={}, mode="minimize")
    with pytest.raises(ValueError, match="metric must be a non-empty string"):
        BasicVariantGenerator(param_space={}, metric="")


def test_default_save_explains_how_to_become_resumable() -> None:
    class Plain(Searcher):
        def suggest(self, trial_id: str) -> Suggestion:
            return None

        def on_trial_complete(self, trial_id: str, result: Any = None, error: bool = False) -> None:
            pass

    with pytest.raises(NotImplementedError, match="override both to make it resumable"):
        Plain().save()


def test_set_search_properties_adopts_space_once() -> None:
    gen = BasicVariantGenerator(seed=0)
    assert gen.set_search_properties("loss", "min", {"x": grid_search([1, 2])}, num_samples=3)
    assert gen.total_trials == 6 and gen.metric == "loss" and gen.mode == "min"
    assert not gen.set_search_properties(None, None, {"y": 1})  # space already set
    assert not gen.set_search_properties("acc", None, None)  # metric clash
    assert gen.set_search_properties("loss", "min", None)  # same values are fine
    given_space = BasicVariantGenerator(param_space={"x": 1})
    assert not given_space.set_search_properties("loss", "min", {"x": 2})


def test_restore_rejects_foreign_state() -> None:
    with pytest.raises(ValueError, match="state was saved by 'Repeater', not 'BasicVariantGenerator'"):
        BasicVariantGenerator().restore({"kind": "Repeater"})


# --- BasicVariantGenerator -------------------------------------------------------------------------


def _drain(gen: Searcher, start: int = 0) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    while (config := gen.suggest(f"t{start + len(out)}")) is not Searcher.FINISHED:
        assert isinstance(config, dict)
        out.append(config)
    return out


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**40), num_samples=st.integers(1, 4), data=st.data())
def test_restore_continues_exactly(seed: int, num_samples: int, data: st.DataObject) -> None:
    reference = _drain(BasicVariantGenerator(param_space=SPACE, num_samples=num_samples, seed=seed))
    cut = data.draw(st.integers(0, len(reference)), label="cut")
    original = BasicVariantGenerator(param_space=SPACE, num_samples=num_samples, seed=seed)
    for i in range(cut):
        original.suggest(f"t{i}")
    state = _roundtrip(original.save())
    resumed = BasicVariantGenerator()  # built without arguments: the state carries everything
    resumed.restore(state)
    assert _drain(resumed, start=cut) == reference[cut:]
    assert _drain(original, start=cut) == reference[cut:]  # saving did not disturb the original


def test_seedless_generator_restores_its_random_seed() -> None:
    original = BasicVariantGenerator(param_space={"x": uniform(0, 1)}, num_samples=6)
    head = [original.suggest(f"t{i}") for i in range(2)]
    state = _roundtrip(original.save())
    tail = _drain(original, start=2)
    resumed = BasicVariantGenerator(param_space={"x": uniform(0, 1)}, num_samples=6)
    resumed.restore(state)
    assert _drain(resumed, start=2) == tail and len(head) == 2


def test_variant_is_random_access() -> None:
    gen = BasicVariantGenerator(param_space=SPACE, num_samples=2, seed=5)
    assert [gen.variant(i) for i in range(gen.total_trials)] == _drain(
        BasicVariantGenerator(param_space=SPACE, num_samples=2, seed=5)
    )
    with pytest.raises(IndexError, match="out of range; there are 6 variants"):
        gen.variant(6)


def test_max_concurrent_and_live_trials_survive_restore() -> None:
    gen = BasicVariantGenerator(param_space={"x": randint(0, 10)}, num_samples=5, seed=0, max_concurrent=2)
    assert isinstance(gen.suggest("a"), dict) and isinstance(gen.suggest("b"), dict)
    assert gen.suggest("c") is None
    resumed = BasicVariantGenerator()
    resumed.restore(_roundtrip(gen.save()))
    assert resumed.suggest("c") is None
    resumed.on_trial_complete("a", {"loss": 1.0})
    assert isinstance(resumed.suggest("c"), dict)
    with pytest.raises(ValueError, match="trial_id 'b' is already live"):
        resumed.suggest("b")


# --- ConcurrencyLimiter ----------------------------------------------------------------------------


def test_limiter_caps_live_trials_and_forwards_only_its_trials() -> None:
    inner = Recorder(limit=4)
    limiter = ConcurrencyLimiter(inner, max_concurrent=2)
    assert limiter.suggest("a") == {"i": 0}
    assert limiter.suggest("b") == {"i": 1}
    assert limiter.suggest("c") is None
    assert inner.count == 2  # the inner searcher was not even asked
    limiter.on_trial_result("a", {"loss": 3})
    limiter.on_trial_result("zzz", {"loss": 3})  # unknown trials are ignored
    limiter.on_trial_complete("a", {"loss": 2})
    assert limiter.suggest("c") == {"i": 2}
    limiter.on_trial_complete("b", None, error=True)
    limiter.on_trial_complete("c", {"loss": 1})
    assert limiter.suggest("d") == {"i": 3}
    limiter.on_trial_complete("d", {"loss": 0})
    assert limiter.suggest("e") is Searcher.FINISHED
    assert [c for c in inner.calls if c[0] != "suggest"] == [
        ("result", "a", {"loss": 3}),
        ("complete", "a", {"loss": 2}, False),
        ("complete", "b", None, True),
        ("complete", "c", {"loss": 1}, False),
        ("complete", "d", {"loss": 0}, False),
    ]


def test_limiter_passes_through_none_without_counting() -> None:
    inner = Recorder()
    limiter = ConcurrencyLimiter(inner, max_concurrent=1)
    inner.pause = True
    assert limiter.suggest("a") is None
    assert limiter.live_trials == []
    inner.pause = False
    assert limiter.suggest("a") == {"i": 0}


def test_limiter_batch_mode_holds_results_until_batch_ends() -> None:
    inner = Recorder()
    limiter = ConcurrencyLimiter(inner, max_concurrent=3, batch=True)
    for tid in "abc":
        assert isinstance(limiter.suggest(tid), dict)
    limiter.on_trial_complete("b", {"loss": 1})
    assert limiter.suggest("d") is None  # batch still running
    limiter.on_trial_result("b", {"loss": 9})  # finished trial: not forwarded
    limiter.on_trial_complete("a", {"loss": 2})
    assert not any(c[0] == "complete" for c in inner.calls)
    state = _roundtrip(limiter.save())
    limiter.on_trial_complete("c", {"loss": 3})
    completes = [c[1] for c in inner.calls if c[0] == "complete"]
    assert completes == ["b", "a", "c"]
    assert limiter.suggest("d") == {"i": 3}
    # the saved mid-batch state resumes the same way
    resumed = ConcurrencyLimiter(Recorder(), max_concurrent=3, batch=True)
    resumed.restore(state)
    assert resumed.suggest("d") is None
    resumed.on_trial_complete("c", {"loss": 3})
    assert resumed.suggest("d") == {"i": 3}


def test_limiter_over_generator_restores() -> None:
    limiter = ConcurrencyLimiter(BasicVariantGenerator(param_space=SPACE, num_samples=2, seed=9), max_concurrent=2)
    reference = _drain(BasicVariantGenerator(param_space=SPACE, num_samples=2, seed=9))
    got = [limiter.suggest("t0"), limiter.suggest("t1")]
    resumed = ConcurrencyLimiter(BasicVariantGenerator(), max_concurrent=2)
    resumed.restore(_roundtrip(limiter.save()))
    for i in range(2, len(reference)):
        assert resumed.suggest(f"t{i}") is None
        resumed.on_trial_complete(f"t{i - 2}", {"loss": 0})
        got.append(resumed.suggest(f"t{i}"))
    assert got == reference


def test_limiter_validates_arguments() -> None:
    with pytest.raises(ValueError, match="max_concurrent must be an integer >= 1"):
        ConcurrencyLimiter(Recorder(), 0)
    with pytest.raises(TypeError, match="searcher must be a Searcher instance"):
        ConcurrencyLimiter("tpe", 2)  # type: ignore[arg-type]


def test_limiter_delegates_search_properties() -> None:
    gen = BasicVariantGenerator(seed=0)
    limiter = ConcurrencyLimiter(gen, 2)
    assert limiter.set_search_properties("acc", "max", {"x": grid_search([1, 2])})
    assert limiter.metric == "acc" and limiter.mode == "max" and gen.total_trials == 2


# --- Repeater ----------------------------------------------------------------------------------------


def test_repeater_repeats_and_reports_group_mean() -> None:
    inner = Recorder(limit=2)
    repeater = Repeater(inner, repeat=3)
    configs = [repeater.suggest(f"t{i}") for i in range(6)]
    assert configs == [{"i": 0, "__trial_index__": k} for k in range(3)] + [
        {"i": 1, "__trial_index__": k} for k in range(3)
    ]
    assert repeater.suggest("t6") is Searcher.FINISHED
    assert [c[1] for c in inner.calls if c[0] == "suggest"] == ["t0", "t3"]
    repeater.on_trial_result("t0", {"loss": 5})  # intermediate results stay with the repeater
    repeater.on_trial_complete("t0", {"loss": 1.0})
    repeater.on_trial_complete("t2", {"loss": 3.0})
    assert not any(c[0] == "complete" for c in inner.calls)
    repeater.on_trial_complete("t1", {"loss": 5.0})
    repeater.on_trial_complete("t3", {"loss": 2.0})
    repeater.on_trial_complete("t4", None, error=True)
    repeater.on_trial_complete("t5", {"loss": float("nan")})
    assert [c for c in inner.calls if c[0] != "suggest"] == [
        ("complete", "t0", {"loss": 3.0}, False),
        ("complete", "t3", {"loss": 2.0}, False),
    ]


def test_repeater_reports_error_when_no_member_has_a_score() -> None:
    inner = Recorder(limit=1)
    repeater = Repeater(inner, repeat=2, set_index=False)
    assert repeater.suggest("a") == {"i": 0} and repeater.suggest("b") == {"i": 0}
    repeater.on_trial_complete("a", None, error=True)
    repeater.on_trial_complete("b", {"other": 1})
    assert inner.calls[-1] == ("complete", "a", None, True)


def test_repeater_configs_are_independent_copies() -> None:
    class Nested(Recorder):
        def suggest(self, trial_id: str) -> Suggestion:
            return {"opt": {"lr": 0.1}}

    repeater = Repeater(Nested(), repeat=2)
    first = repeater.suggest("a")
    assert isinstance(first, dict)
    first["opt"]["lr"] = 99
    assert repeater.suggest("b") == {"opt": {"lr": 0.1}, "__trial_index__": 1}


def test_repeater_needs_a_metric() -> None:
    repeater = Repeater(Recorder(metric=None), repeat=2)
    with pytest.raises(ValueError, match="Repeater needs a metric to average"):
        repeater.suggest("a")
    assert repeater.set_search_properties("loss", "min", None)
    assert repeater.suggest("a") == {"i": 0, "__trial_index__": 0}


def test_repeater_save_restore_mid_group() -> None:
    def run(repeater: Repeater, ids: range) -> list[Any]:
        return [repeater.suggest(f"t{i}") for i in ids]

    original = Repeater(
        ConcurrencyLimiter(BasicVariantGenerator(param_space=SPACE, seed=4, metric="loss"), max_concurrent=10), repeat=2
    )
    head = run(original, range(3))
    original.on_trial_complete("t0", {"loss": 1.0})
    state = _roundtrip(original.save())
    tail = run(original, range(3, 6))
    original.on_trial_complete("t1", {"loss": 3.0})

    resumed = Repeater(ConcurrencyLimiter(BasicVariantGenerator(), max_concurrent=10), repeat=2)
    resumed.restore(state)
    assert run(resumed, range(3, 6)) == tail
    assert head[0] is not None and head[1] == {**head[0], "__trial_index__": 1}
    resumed.on_trial_complete("t1", {"loss": 3.0})
    inner_limiter = resumed.searcher
    assert isinstance(inner_limiter, ConcurrencyLimiter)
    assert "t0" not in inner_limiter.live_trials  # the group's mean reached the inner searchers


def test_repeater_validates_arguments() -> None:
    with pytest.raises(ValueError, match="repeat must be an integer >= 1"):
        Repeater(Recorder(), repeat=0)
