"""Searcher contract: BasicVariantGenerator save/restore, ConcurrencyLimiter and Repeater."""

from __future__ import annotations

import pickle
import random
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
    assert SearcherSignal("finished") is Searcher.FINISHED  # (what a pickle made before it was Ray's string holds)


def test_finished_is_rays_string() -> None:
    """Ray 2.60's ``Searcher.FINISHED`` is ``"FINISHED"`` (recorded, tests/data/ray_api_semantics.json)."""
    from tests._ray_api import RAY_API

    ray = RAY_API["constants"]["Searcher.FINISHED"]
    assert (repr(Searcher.FINISHED), str(Searcher.FINISHED)) == (ray["repr"], ray["str"])
    assert Searcher.FINISHED == "FINISHED" and "FINISHED" == Searcher.FINISHED and Searcher.FINISHED != "finished"
    assert (str(Searcher.FINISHED), repr([Searcher.FINISHED])) == ("FINISHED", "['FINISHED']")


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
    original.capture_driver_stream()  # (fit() does this: the run's copy of numpy's global stream is saved)
    head = [original.suggest(f"t{i}") for i in range(2)]
    state = _roundtrip(original.save())
    tail = _drain(original, start=2)
    resumed = BasicVariantGenerator(param_space={"x": uniform(0, 1)}, num_samples=6)
    resumed.restore(state)
    assert _drain(resumed, start=2) == tail and len(head) == 2


def test_variant_is_random_access() -> None:
    # (only with Python's draws: numpy's are one stream, as Ray's)
    gen = BasicVariantGenerator(param_space=SPACE, num_samples=2, random_state=random.Random(5))
    assert [gen.variant(i) for i in range(gen.total_trials)] == _drain(
        BasicVariantGenerator(param_space=SPACE, num_samples=2, random_state=random.Random(5))
    )
    with pytest.raises(IndexError, match="out of range; there are 6 variants"):
        gen.variant(6)
    with pytest.raises(RuntimeError, match="call suggest\\(\\) in order"):
        BasicVariantGenerator(param_space=SPACE, seed=5).variant(0)


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


# --- Ray 2.60's BasicVariantGenerator(points_to_evaluate, max_concurrent, constant_grid_search, random_state)
#
# Expected structures recorded from Ray 2.60 (/work/rayvenv): Tuner(trainable, param_space=...,
# tune_config=TuneConfig(search_alg=ray.tune.search.basic_variant.BasicVariantGenerator(...), num_samples=n))
# .fit() under ray.init(num_cpus=2), trials listed by trial id (creation order).  Ray draws with numpy,
# audition with random, so drawn values differ: the tests check which values are fixed, which are drawn,
# how many trials there are and in which order.

AB_SPACE: dict[str, Any] = {"a": grid_search([1, 2]), "b": randint(0, 3)}
XY_SPACE: dict[str, Any] = {"x": uniform(0, 1), "y": choice(["a", "b", "c"])}
NESTED: dict[str, Any] = {
    "model": {"lr": loguniform(1e-4, 1e-1), "layers": grid_search([1, 2])}, "bs": grid_search([8, 16])
}
GH_SPACE: dict[str, Any] = {"x": uniform(0, 1), "g": grid_search([1, 2, 3]), "h": grid_search(["p", "q"])}


def _run(gen: BasicVariantGenerator, space: dict[str, Any], num_samples: int = 1) -> list[dict[str, Any]]:
    """As the Tuner wires a generator the user passed: the Tuner's space and num_samples."""
    assert gen.set_search_properties(None, None, space, num_samples=num_samples)
    return _drain(gen)


def test_points_to_evaluate_ray_docstring_example() -> None:
    # Ray: 6 trials, a = [2, 1, 1, 2, 1, 2]; b = 2 in trials 0, 2, 3 (trial 1 and the last sweep draw b)
    points = [{"a": 2, "b": 2}, {"a": 1}, {"b": 2}]
    gen = BasicVariantGenerator(points_to_evaluate=points)
    configs = _run(gen, AB_SPACE, num_samples=4)
    assert gen.total_trials == 6 and len(configs) == 6
    assert [c["a"] for c in configs] == [2, 1, 1, 2, 1, 2]
    assert [configs[i]["b"] for i in (0, 2, 3)] == [2, 2, 2]
    assert all(c["b"] in (0, 1, 2) for c in configs)
    assert points == [{"a": 2, "b": 2}, {"a": 1}, {"b": 2}]  # the caller's list is not consumed


def test_full_points_come_first_and_each_uses_up_a_sample() -> None:
    points = [{"x": 0.5, "y": "a"}, {"x": 0.1, "y": "b"}]
    # Ray, num_samples=1: both points run (2 trials), nothing is sampled
    assert _run(BasicVariantGenerator(points_to_evaluate=points), XY_SPACE) == points
    # Ray, num_samples=5: the 2 points, then 3 sampled trials
    configs = _run(BasicVariantGenerator(points_to_evaluate=points), XY_SPACE, num_samples=5)
    assert configs[:2] == points and len(configs) == 5
    assert all(0 <= c["x"] <= 1 and c["y"] in "abc" and c not in points for c in configs[2:])


def test_partial_point_samples_the_rest() -> None:
    # Ray: {"x": 0.5} gives x=0.5 with y drawn, then 2 sampled trials (num_samples=3)
    configs = _run(BasicVariantGenerator(points_to_evaluate=[{"x": 0.5}]), XY_SPACE, num_samples=3)
    assert len(configs) == 3 and configs[0]["x"] == 0.5 and configs[0]["y"] in "abc"
    assert 0.5 not in (configs[1]["x"], configs[2]["x"])


def test_points_and_max_concurrent_positionally() -> None:
    # Ray: BasicVariantGenerator([{"x": 0.25, "y": "c"}]) with num_samples=2 -> the point, then 1 sampled
    configs = _run(BasicVariantGenerator([{"x": 0.25, "y": "c"}]), XY_SPACE, num_samples=2)
    assert configs[0] == {"x": 0.25, "y": "c"} and len(configs) == 2
    gen = BasicVariantGenerator(None, 1)
    assert gen.max_concurrent == 1
    gen.set_search_properties(None, None, XY_SPACE, num_samples=3)
    assert isinstance(gen.suggest("t0"), dict) and gen.suggest("t1") is None
    gen.on_trial_complete("t0")
    assert isinstance(gen.suggest("t1"), dict)


def test_points_override_grids_constants_and_whole_subdicts() -> None:
    # Ray, num_samples=2: point 0 fixes lr and leaves both grids, 4 trials (bs fastest: sorted paths);
    # point 1 fixes layers=3 (not a grid value) and bs, 1 trial with lr drawn; 5 trials in all
    configs = _run(BasicVariantGenerator([{"model": {"lr": 0.01}}, {"model": {"layers": 3}, "bs": 8}]), NESTED, 2)
    assert [(c["model"]["lr"], c["model"]["layers"], c["bs"]) for c in configs[:4]] == [
        (0.01, 1, 8), (0.01, 1, 16), (0.01, 2, 8), (0.01, 2, 16)]
    assert len(configs) == 5 and configs[4]["model"]["layers"] == 3 and configs[4]["bs"] == 8
    assert configs[4]["model"]["lr"] != 0.01
    # Ray: {"model": 5} replaces the whole sub-dict (its grid too): 2 trials, one per bs
    assert _run(BasicVariantGenerator([{"model": 5}]), NESTED) == [{"model": 5, "bs": 8}, {"model": 5, "bs": 16}]
    # Ray: values outside the domain are used as given (Ray logs a warning); a constant is replaced
    assert _run(BasicVariantGenerator([{"x": 7.0, "y": "zz"}]), XY_SPACE) == [{"x": 7.0, "y": "zz"}]
    assert _run(BasicVariantGenerator([{"c": 6}]), {"x": uniform(0, 1), "c": 5})[0]["c"] == 6
    # Ray: an empty point uses up a sample like any other (num_samples=2: 2 trials)
    assert len(_run(BasicVariantGenerator([{}]), {"x": uniform(0, 1)}, num_samples=2)) == 2


def test_point_with_a_key_the_space_lacks_is_refused() -> None:
    # Ray raises KeyError('zzz') when the trials are generated; audition a ValueError naming the path
    with pytest.raises(ValueError, match=r"points_to_evaluate\[0\] sets 'zzz', which is not in the param_space"):
        _run(BasicVariantGenerator([{"zzz": 1}]), {"x": uniform(0, 1)})
    with pytest.raises(ValueError, match=r"points_to_evaluate\[1\] sets 'm/zzz'"):
        BasicVariantGenerator([{}, {"m": {"zzz": 1}}], param_space={"m": {"a": uniform(0, 1)}})


@pytest.mark.parametrize(("points", "fragment"), [
    ({"x": 1}, "got a dict; wrap one point in a list"),  # Ray: AttributeError
    ([1], r"points_to_evaluate\[0\] must be a dict"),  # Ray: AttributeError
    ("xy", "must be a list of dicts"),
])
def test_bad_points_to_evaluate(points: Any, fragment: str) -> None:
    with pytest.raises(TypeError, match=fragment):
        BasicVariantGenerator(points)


def test_constant_grid_search_holds_draws_across_each_sweep() -> None:
    # Ray, num_samples=2: 12 trials; x is one value for trials 0-5 and another for 6-11; g fastest
    configs = _run(BasicVariantGenerator(constant_grid_search=True), GH_SPACE, num_samples=2)
    assert [(c["g"], c["h"]) for c in configs] == [(1, "p"), (2, "p"), (3, "p"), (1, "q"), (2, "q"), (3, "q")] * 2
    assert len({c["x"] for c in configs[:6]}) == 1 and len({c["x"] for c in configs[6:]}) == 1
    assert configs[0]["x"] != configs[6]["x"]
    # Ray, constant_grid_search=False: every one of the 6 trials draws its own x
    assert len({c["x"] for c in _run(BasicVariantGenerator(), GH_SPACE)}) == 6


def test_constant_grid_search_resolves_grid_readers_per_point() -> None:
    # Ray: y = g * 10 follows the grid, z = x is held with x
    space = {"x": uniform(0, 1), "g": grid_search([1, 2]),
             "y": sample_from(lambda spec: spec.config.g * 10), "z": sample_from(lambda spec: spec.config.x)}
    configs = _run(BasicVariantGenerator(constant_grid_search=True), space)
    assert [(c["g"], c["y"]) for c in configs] == [(1, 10), (2, 20)]
    assert configs[0]["x"] == configs[1]["x"] == configs[0]["z"] == configs[1]["z"]
    # Ray's Tuner calls every sample_from as each trial is added, so one that draws is drawn per trial
    # (recorded from Ray 2.60 with np.random.uniform(): tests/test_ray_draws.py)
    drawn = {"g": grid_search([1, 2, 3]), "r": sample_from(lambda spec: spec.random.random())}
    assert len({c["r"] for c in _run(BasicVariantGenerator(constant_grid_search=True), drawn)}) == 3


def test_constant_grid_search_with_points() -> None:
    # Ray, num_samples=3: {"g": 9} -> 2 trials (h swept), {"h": "p"} -> 3 (g swept), then one full sweep
    # of 6: 11 trials, x held within each of the three groups
    configs = _run(BasicVariantGenerator([{"g": 9}, {"h": "p"}], constant_grid_search=True), GH_SPACE, 3)
    assert [(c["g"], c["h"]) for c in configs] == [
        (9, "p"), (9, "q"), (1, "p"), (2, "p"), (3, "p"),
        (1, "p"), (2, "p"), (3, "p"), (1, "q"), (2, "q"), (3, "q")]
    groups = [configs[:2], configs[2:5], configs[5:]]
    assert [len({c["x"] for c in group}) for group in groups] == [1, 1, 1]
    assert len({group[0]["x"] for group in groups}) == 3


def test_random_state_makes_runs_reproducible() -> None:
    # Ray: random_state=42 twice gives the same 4 configs, 43 others; with points too (random_state=7)
    space = {"x": uniform(0, 1), "n": randint(0, 100), "g": grid_search([1, 2])}
    first = _run(BasicVariantGenerator(random_state=42), space, 2)
    assert first == _run(BasicVariantGenerator(random_state=42), space, 2)
    assert first != _run(BasicVariantGenerator(random_state=43), space, 2)
    with_points = _run(BasicVariantGenerator([{"x": 0.5}], random_state=7), space, 2)
    assert with_points == _run(BasicVariantGenerator([{"x": 0.5}], random_state=7), space, 2)
    assert [c["x"] for c in with_points[:2]] == [0.5, 0.5] and [c["g"] for c in with_points] == [1, 2, 1, 2]
    # Ray also takes a numpy Generator/RandomState; audition seeds itself from it (and from a random.Random)
    np = pytest.importorskip("numpy")
    assert _run(BasicVariantGenerator(random_state=np.random.default_rng(3)), space) == _run(
        BasicVariantGenerator(random_state=np.random.default_rng(3)), space)
    assert len(_run(BasicVariantGenerator(random_state=np.random.RandomState(3)), space)) == 2
    assert len(_run(BasicVariantGenerator(random_state=random.Random(3)), space)) == 2


def test_random_state_and_seed_are_validated() -> None:
    with pytest.raises(TypeError, match="random_state must be an int seed"):
        BasicVariantGenerator(random_state="x")
    with pytest.raises(ValueError, match="give random_state or seed, not both"):
        BasicVariantGenerator(random_state=1, seed=1)
    with pytest.raises(TypeError, match="constant_grid_search must be True or False"):
        BasicVariantGenerator(constant_grid_search="yes")  # type: ignore[arg-type]
    # the old positional space now lands in points_to_evaluate: the error says how to pass a space
    with pytest.raises(TypeError, match=r"BasicVariantGenerator\(param_space=\{...\}\)"):
        BasicVariantGenerator({"x": 1})


def test_points_and_constant_grid_search_survive_restore() -> None:
    def make() -> BasicVariantGenerator:
        gen = BasicVariantGenerator([{"g": 9}, {"h": "p", "x": 0.5}], constant_grid_search=True, random_state=1)
        gen.set_search_properties(None, None, GH_SPACE, num_samples=3)
        return gen

    reference = _drain(make())
    for cut in range(len(reference) + 1):
        original = make()
        for i in range(cut):
            original.suggest(f"t{i}")
        resumed = BasicVariantGenerator()  # built without arguments: the state carries everything
        resumed.restore(_roundtrip(original.save()))
        assert _drain(resumed, start=cut) == reference[cut:]


def test_state_saved_before_points_existed_restores() -> None:
    gen = BasicVariantGenerator(param_space=SPACE, num_samples=2, seed=3)
    reference = _drain(gen)
    state = BasicVariantGenerator(param_space=SPACE, num_samples=2, seed=3).save()
    for key in ("points", "constant_grid_search", "space_set"):
        del state[key]  # as saved before Ray's signature
    resumed = BasicVariantGenerator()
    resumed.restore(state)
    assert _drain(resumed) == reference
