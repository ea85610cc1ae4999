"""Search-space domains, validation and variant generation (grid x samples, sample_from)."""

from __future__ import annotations

import math
import pickle
import random
from typing import Any

import cloudpickle
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actors.search import (
    BasicVariantGenerator,
    Searcher,
    SearchSpaceError,
    choice,
    grid_search,
    lograndint,
    loguniform,
    qlograndint,
    qloguniform,
    qrandint,
    qrandn,
    quniform,
    randint,
    randn,
    sample_from,
    uniform,
    validate_param_space,
)


def _all(gen: BasicVariantGenerator) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    while True:
        config = gen.suggest(f"t{len(out)}")
        if config is Searcher.FINISHED:
            return out
        assert isinstance(config, dict)
        out.append(config)


# --- domain validation -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("build", "fragment"),
    [
        (lambda: uniform(1, 1), "uniform(lower=1, upper=1): lower must be < upper; use a constant"),
        (lambda: uniform(2, 1), "lower must be < upper; swap them"),
        (lambda: uniform(0, math.inf), "upper must be finite"),
        (
            lambda: uniform("0", 1),  # type: ignore[arg-type]
            "lower must be a real number, got str",
        ),
        (lambda: uniform(True, 2), "lower must be a real number, got bool"),
        (lambda: loguniform(0, 1), "loguniform(lower=0, upper=1, base=10): lower must be > 0"),
        (lambda: loguniform(-1, 1), "use uniform() for ranges that include 0"),
        (lambda: loguniform(1, 10, base=1), "base must be > 0 and != 1"),
        (lambda: quniform(0, 1, 0), "q must be > 0"),
        (lambda: quniform(0.1, 0.15, 1), "no multiple of q=1.0 lies between lower and upper"),
        (lambda: qloguniform(0, 1, 0.1), "qloguniform(lower=0, upper=1, q=0.1, base=10): lower must be > 0"),
        (lambda: randint(5, 5), "randint(lower=5, upper=5): upper is exclusive"),
        (
            lambda: randint(0, 1.5),  # type: ignore[arg-type]
            "upper must be an integer, got float",
        ),
        (lambda: qrandint(5, 1, 1), "lower must be <= upper"),
        (lambda: qrandint(0, 10, 0), "q must be a positive integer"),
        (lambda: qrandint(1, 2, 5), "no multiple of q=5"),
        (lambda: lograndint(0, 10), "lograndint(lower=0, upper=10, base=10): lower must be >= 1"),
        (lambda: qlograndint(0, 10, 2), "lower must be >= 1"),
        (lambda: randn(0, 0), "randn(mean=0, sd=0): sd must be > 0"),
        (lambda: qrandn(0, 1, -1), "q must be > 0"),
        (lambda: choice([]), "choice([]): categories is empty"),
        (lambda: choice("abc"), "categories must be a list of options, got str"),
        (lambda: grid_search([]), "grid_search([]): values is empty"),
        (lambda: grid_search({"a": 1}), "values must be a list of options, got dict"),
        (
            lambda: sample_from(3),  # type: ignore[arg-type]
            "sample_from(func=3): func must be callable",
        ),
    ],
)
def test_domain_arguments_are_validated(build: Any, fragment: str) -> None:
    with pytest.raises(SearchSpaceError) as info:
        build()
    assert fragment in str(info.value)
    assert isinstance(info.value, ValueError)


def test_integral_floats_are_accepted_for_int_domains() -> None:
    domain = randint(0, 1e3)  # type: ignore[arg-type]
    assert domain.upper == 1000 and isinstance(domain.upper, int)


@pytest.mark.parametrize(
    ("space", "fragment"),
    [
        ([1, 2], "param_space must be a dict"),
        ({(1,): uniform(0, 1)}, "key (1,) (tuple) cannot be a param_space key"),
        ({"a": {"b": {b"x": 1}}}, "at 'a/b': key b'x'"),
        ({"a": {"grid_search": []}}, "at 'a': grid_search([]): values is empty"),
        ({"a": grid_search([grid_search([1])])}, "grid_search cannot be nested inside grid_search"),
        ({"a": choice([{"b": grid_search([1, 2])}])}, "grid_search cannot be nested inside choice"),
    ],
)
def test_validate_param_space_rejects(space: Any, fragment: str) -> None:
    with pytest.raises(SearchSpaceError) as info:
        validate_param_space(space)
    assert fragment in str(info.value)


@pytest.mark.parametrize("num_samples", [-1, 1.5, True])
def test_bad_num_samples(num_samples: Any) -> None:
    with pytest.raises(SearchSpaceError, match=r"num_samples must be an integer >= 1 \(0 draws no trial\)"):
        BasicVariantGenerator(param_space={}, num_samples=num_samples)


def test_generator_validates_space_eagerly() -> None:
    with pytest.raises(SearchSpaceError, match="param_space must be a dict"):
        BasicVariantGenerator(param_space=[1])  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="seed must be an int seed"):
        BasicVariantGenerator(param_space={}, seed="x")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="max_concurrent"):
        BasicVariantGenerator(param_space={}, max_concurrent=-1)


def test_domains_pickle_and_compare_by_value() -> None:
    domains = [
        uniform(0, 1),
        qloguniform(1e-4, 1e-1, 5e-5),
        qrandint(1, 10, 3),
        randn(1, 2),
        choice([1, "a"]),
    ]
    for domain in domains:
        assert pickle.loads(pickle.dumps(domain)) == domain
    fn = sample_from(lambda spec: spec.config.a)
    assert (
        cloudpickle.loads(cloudpickle.dumps(fn)).call(type("S", (), {"config": type("C", (), {"a": 3})})) == 3
    )


# --- sampling bounds -----------------------------------------------------------------------------

finite = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False, allow_infinity=False)


@settings(max_examples=60, deadline=None)
@given(a=finite, b=finite, seed=st.integers(0, 2**32))
def test_uniform_stays_in_bounds(a: float, b: float, seed: int) -> None:
    if a == b:
        return
    lower, upper = min(a, b), max(a, b)
    rng = random.Random(seed)
    for _ in range(20):
        assert lower <= uniform(lower, upper).sample(rng) <= upper


@settings(max_examples=60, deadline=None)
@given(
    lower=st.floats(1e-8, 1e3),
    span=st.floats(1.0001, 1e6),
    base=st.sampled_from([2, math.e, 10]),
    seed=st.integers(),
)
def test_loguniform_stays_in_bounds(lower: float, span: float, base: float, seed: int) -> None:
    upper = lower * span
    rng = random.Random(seed)
    for _ in range(20):
        assert lower <= loguniform(lower, upper, base).sample(rng) <= upper


@settings(max_examples=60, deadline=None)
@given(
    lower=st.integers(-1000, 1000),
    width=st.integers(0, 1000),
    q=st.sampled_from([0.1, 0.25, 0.5, 1, 3, 0.001]),
    seed=st.integers(),
)
def test_quniform_stays_in_bounds_on_multiples(lower: int, width: int, q: float, seed: int) -> None:
    lo, hi = lower / 10, (lower + width + 1) / 10
    try:
        domain = quniform(lo, hi, q)
    except SearchSpaceError:
        return  # no multiple of q in range: rejected up front
    rng = random.Random(seed)
    for _ in range(20):
        value = domain.sample(rng)
        assert lo <= value <= hi
        assert abs(value / q - round(value / q)) < 1e-6


@settings(max_examples=60, deadline=None)
@given(lower=st.integers(-500, 500), width=st.integers(1, 500), q=st.integers(1, 7), seed=st.integers())
def test_integer_domains_respect_bounds(lower: int, width: int, q: int, seed: int) -> None:
    upper = lower + width
    rng = random.Random(seed)
    plain = randint(lower, upper)
    for _ in range(10):
        value = plain.sample(rng)
        assert isinstance(value, int) and lower <= value < upper
    try:
        quant = qrandint(lower, upper, q)
    except SearchSpaceError:
        return
    for _ in range(10):
        value = quant.sample(rng)
        assert lower <= value <= upper and value % q == 0
    if lower >= 1:
        for _ in range(10):
            assert lower <= lograndint(lower, upper).sample(rng) < upper


def test_quniform_reaches_the_inclusive_upper_multiple() -> None:
    domain = quniform(0, 0.3, 0.1)
    rng = random.Random(0)
    values = {domain.sample(rng) for _ in range(200)}
    assert values == {0.0, 0.1, 0.2, 0.3}


def test_qrandint_upper_is_inclusive_and_randint_exclusive() -> None:
    rng = random.Random(1)
    assert {qrandint(3, 9, 3).sample(rng) for _ in range(200)} == {3, 6, 9}
    assert {randint(0, 3).sample(rng) for _ in range(200)} == {0, 1, 2}


def test_qrandn_is_quantized() -> None:
    rng = random.Random(2)
    for _ in range(50):
        value = qrandn(10, 2, 0.2).sample(rng)
        assert abs(value * 5 - round(value * 5)) < 1e-9


# --- variant generation --------------------------------------------------------------------------


def test_grid_times_samples_count_and_order() -> None:
    gen = BasicVariantGenerator(
        param_space={"a": grid_search([1, 2]), "b": grid_search(["x", "y", "z"]), "c": 7}, num_samples=2, seed=0
    )
    assert gen.total_trials == 12
    configs = _all(gen)
    assert len(configs) == 12
    pairs = [(c["a"], c["b"]) for c in configs]
    sweep = [(1, "x"), (2, "x"), (1, "y"), (2, "y"), (1, "z"), (2, "z")]
    assert pairs == sweep + sweep  # first key fastest; whole grid once per sample
    assert all(c["c"] == 7 for c in configs)
    assert gen.suggest("more") is Searcher.FINISHED


def test_grid_keys_are_swept_in_sorted_path_order_as_ray() -> None:
    # recorded from Ray 2.60 (ray.tune.search.variant_generator.generate_variants, and the trial
    # numbering of Tuner.fit() for the third space): grid keys sorted by path, the first varies fastest
    flat = _all(BasicVariantGenerator(param_space={"b": grid_search([1, 2]), "a": grid_search([10, 20])}, seed=0))
    assert flat == [{"b": 1, "a": 10}, {"b": 1, "a": 20}, {"b": 2, "a": 10}, {"b": 2, "a": 20}]
    nested = _all(BasicVariantGenerator(param_space={
        "z": {"q": grid_search([1, 2]), "p": grid_search(["x", "y"])},
        "m": grid_search([5, 6]), "B": grid_search([0, 1])}, seed=0))
    assert [(c["z"]["q"], c["z"]["p"], c["m"], c["B"]) for c in nested] == [
        (1, "x", 5, 0), (1, "x", 5, 1), (1, "x", 6, 0), (1, "x", 6, 1),
        (1, "y", 5, 0), (1, "y", 5, 1), (1, "y", 6, 0), (1, "y", 6, 1),
        (2, "x", 5, 0), (2, "x", 5, 1), (2, "x", 6, 0), (2, "x", 6, 1),
        (2, "y", 5, 0), (2, "y", 5, 1), (2, "y", 6, 0), (2, "y", 6, 1)]
    assert list(nested[0]) == ["z", "m", "B"]  # the config keeps the written key order
    lists = _all(BasicVariantGenerator(param_space={
        "l": [grid_search([1, 2]), grid_search([3, 4])], "k": grid_search(["u", "v"]),
        "k10": grid_search([7, 8]), "k9": grid_search([0, 1])}, num_samples=2, seed=0))
    got = [(c["l"][0], c["l"][1], c["k"], c["k10"], c["k9"]) for c in lists]
    # Ray: k fastest, then k10, k9 ("k10" < "k9" as strings), l/0, l/1; trials 32-63 repeat 0-31
    first = [(1, 3, "u", 7, 0), (1, 3, "v", 7, 0), (1, 3, "u", 8, 0), (1, 3, "v", 8, 0),
             (1, 3, "u", 7, 1), (1, 3, "v", 7, 1), (1, 3, "u", 8, 1), (1, 3, "v", 8, 1)]
    assert got[:8] == first
    assert got[8:16] == [(2, 3, *rest) for _, _, *rest in first]
    assert got[16:24] == [(1, 4, *rest) for _, _, *rest in first]
    assert got[24:32] == [(2, 4, *rest) for _, _, *rest in first]
    assert got[32:] == got[:32]


def test_a_state_saved_before_sorting_resumes_in_written_order() -> None:
    gen = BasicVariantGenerator(param_space={"b": grid_search([1, 2]), "a": grid_search([10, 20])}, seed=0)
    gen.suggest("t0")
    state = gen.save()
    del state["grid_order"]  # as saved by a version that swept grids in written order
    del state["draws"]  # (and drew with Python's random)
    old = BasicVariantGenerator()
    old.restore(state)
    assert [old.suggest(f"t{i}") for i in (1, 2, 3)] == [{"b": 2, "a": 10}, {"b": 1, "a": 20}, {"b": 2, "a": 20}]
    new = BasicVariantGenerator()
    new.restore(gen.save())
    assert [new.suggest(f"t{i}") for i in (1, 2, 3)] == [{"b": 1, "a": 20}, {"b": 2, "a": 10}, {"b": 2, "a": 20}]


def test_nested_dicts_and_literal_grid_spelling() -> None:
    space = {
        "model": {
            "layers": grid_search([1, 2]),
            "act": {"grid_search": ["relu", "tanh"]},
            "width": randint(8, 9),
        },
        "opt": {"lr": loguniform(1e-4, 1e-2)},
        "tags": ["x", uniform(0, 1)],
    }
    configs = _all(BasicVariantGenerator(param_space=space, num_samples=3, seed=1))
    assert len(configs) == 12
    assert {(c["model"]["layers"], c["model"]["act"]) for c in configs} == {
        (1, "relu"),
        (2, "relu"),
        (1, "tanh"),
        (2, "tanh"),
    }
    for c in configs:
        assert c["model"]["width"] == 8
        assert 1e-4 <= c["opt"]["lr"] <= 1e-2
        assert c["tags"][0] == "x" and 0 <= c["tags"][1] <= 1
    # random domains are sampled afresh for every variant
    assert len({c["opt"]["lr"] for c in configs}) == 12


def test_variants_do_not_share_containers_with_the_space() -> None:
    space = {"nested": {"k": [1, 2]}}
    gen = BasicVariantGenerator(param_space=space, num_samples=2, seed=0)
    first, second = _all(gen)
    first["nested"]["k"].append(3)
    assert second["nested"]["k"] == [1, 2] and space["nested"]["k"] == [1, 2]


def test_empty_or_missing_space_gives_num_samples_empty_configs() -> None:
    assert _all(BasicVariantGenerator(num_samples=3)) == [{}, {}, {}]


def test_choice_of_dicts_with_domains_is_conditional() -> None:
    space = {"opt": choice([{"name": "sgd", "momentum": uniform(0.5, 0.9)}, {"name": "adam"}])}
    configs = _all(BasicVariantGenerator(param_space=space, num_samples=40, seed=3))
    names = {c["opt"]["name"] for c in configs}
    assert names == {"sgd", "adam"}
    for c in configs:
        if c["opt"]["name"] == "sgd":
            assert 0.5 <= c["opt"]["momentum"] <= 0.9


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(min_value=0, max_value=2**63))
def test_same_seed_same_sequence(seed: int) -> None:
    space = {
        "a": grid_search([1, 2]),
        "lr": loguniform(1e-5, 1),
        "n": qrandint(1, 100, 5),
        "c": choice(["a", "b", "c"]),
        "g": randn(),
        "f": sample_from(lambda spec: spec.random.random() + spec.config.lr),
    }
    first = _all(BasicVariantGenerator(param_space=space, num_samples=3, seed=seed))
    second = _all(BasicVariantGenerator(param_space=space, num_samples=3, seed=seed))
    assert first == second


def test_different_seeds_differ_and_no_seed_is_random() -> None:
    space = {"x": uniform(0, 1)}
    def gen(seed: int | None = None) -> BasicVariantGenerator:
        return BasicVariantGenerator(param_space=space, num_samples=5, seed=seed)

    assert _all(gen(1)) != _all(gen(2))
    assert _all(gen()) != _all(gen())


def test_generator_never_touches_the_global_rng() -> None:
    random.seed(123)
    expected = random.random()
    random.seed(123)
    _all(BasicVariantGenerator(param_space={"x": uniform(0, 1), "g": grid_search([1, 2])}, num_samples=5, seed=0))
    assert random.random() == expected


# --- sample_from -----------------------------------------------------------------------------------


def test_sample_from_reads_resolved_config_by_attribute_and_item() -> None:
    space = {
        "lr": grid_search([0.1, 0.2]),
        "model": {"width": grid_search([4, 8])},
        "double": sample_from(lambda spec: spec.config.lr * 2),
        "area": sample_from(lambda spec: spec.config["model"]["width"] * spec.config.model.width),
        "const": sample_from(lambda: "no-arg functions work too"),
    }
    configs = _all(BasicVariantGenerator(param_space=space, seed=0))
    assert [(c["double"], c["area"]) for c in configs] == [(0.2, 16), (0.4, 16), (0.2, 64), (0.4, 64)]
    assert all(c["const"] == "no-arg functions work too" for c in configs)


def test_sample_from_dependencies_resolve_regardless_of_key_order() -> None:
    space = {
        "c": sample_from(lambda spec: spec.config.b + 1),
        "b": sample_from(lambda spec: spec.config.a * 10),
        "a": randint(1, 5),
        "nested": {"d": sample_from(lambda spec: spec.config.c * 2)},
    }
    for config in _all(BasicVariantGenerator(param_space=space, num_samples=5, seed=0)):
        assert config["b"] == config["a"] * 10
        assert config["c"] == config["b"] + 1
        assert config["nested"]["d"] == config["c"] * 2


def test_sample_from_cycle_is_reported() -> None:
    space = {"a": sample_from(lambda spec: spec.config.b), "b": sample_from(lambda spec: spec.config.a)}
    gen = BasicVariantGenerator(param_space=space, seed=0)
    with pytest.raises(SearchSpaceError, match=r"cycle \('a' needs 'b', 'b' needs 'a'\)"):
        gen.suggest("t0")


def test_sample_from_errors_name_the_key() -> None:
    gen = BasicVariantGenerator(param_space={"x": 1, "y": sample_from(lambda spec: spec.config.nope)}, seed=0)
    with pytest.raises(SearchSpaceError, match=r"at 'y' raised AttributeError: config has no key 'nope'"):
        gen.suggest("t0")


def test_grid_values_may_hold_random_domains() -> None:
    gen = BasicVariantGenerator(param_space={"p": grid_search([{"x": uniform(0, 1)}, {"x": randint(10, 20)}])}, seed=0)
    first, second = _all(gen)
    assert 0 <= first["p"]["x"] <= 1 and 10 <= second["p"]["x"] < 20


# --- Ray 2.60's Domain.sample(config=None, size=1, random_state=None) ----------------------------------
#
# Recorded from Ray 2.60 (/work/rayvenv, a script calling each tune domain's .sample() with no arguments,
# size=3, random_state=42 twice, after np.random.seed(0) twice, and bad sizes).  size=1 gives one plain
# value: float for the float domains, int for the integer ones, the category itself for choice, the
# function's value for sample_from.  size=3 gives 3 values: a numpy array for uniform, loguniform,
# randn, randint and lograndint, a list for the quantized domains, choice and sample_from; audition
# always gives a list (numpy is not a dependency).

SCALAR_TYPES: list[tuple[Any, Any]] = [
    (uniform(0, 1), float), (loguniform(1e-4, 1e-1), float), (quniform(0, 1, 0.1), float),
    (randint(0, 10), int), (qrandint(0, 10, 2), int), (lograndint(1, 100), int),
    (randn(0, 1), float), (qrandn(0, 1, 0.5), float), (choice([1, "a", 2.5]), (int, str, float)),
    (sample_from(lambda spec: 7), int), (sample_from(lambda: 8), int),
]


@pytest.mark.parametrize(("domain", "kind"), SCALAR_TYPES)
def test_domain_sample_with_ray_arguments(domain: Any, kind: Any) -> None:
    value = domain.sample()
    assert isinstance(value, kind) and not isinstance(value, list)
    values = domain.sample(size=3)
    assert isinstance(values, list) and len(values) == 3 and all(isinstance(v, kind) for v in values)
    # Ray: random_state=42 gives the same value twice, and size=3's first value is size=1's value
    assert domain.sample(random_state=42) == domain.sample(random_state=42)
    assert domain.sample(size=3, random_state=42)[0] == domain.sample(random_state=42)


def test_domain_sample_without_random_state_follows_the_global_seed() -> None:
    # as Ray: no random_state draws from numpy's global stream, so np.random.seed(n) repeats the draws
    # (recorded from Ray 2.60: np.random.seed(3), then uniform(0, 1), randint(0, 9), choice(["a", "b"])
    # .sample() gave these)
    np = pytest.importorskip("numpy")
    np.random.seed(3)
    assert [uniform(0, 1).sample(), randint(0, 9).sample(), choice(["a", "b"]).sample()] == [
        0.5507979025745755, 3, "a"]


def test_domain_sample_random_state_kinds() -> None:
    np = pytest.importorskip("numpy")
    # Ray takes numpy Generators and RandomStates; audition seeds a random.Random from them
    assert 0 <= uniform(0, 1).sample(random_state=np.random.default_rng(1)) <= 1
    assert choice(["a", "b"]).sample(random_state=np.random.RandomState(1)) in ("a", "b")
    rng = random.Random(5)
    expected = random.Random(5)
    assert randint(0, 100).sample(random_state=rng) == randint(0, 100).sample(random_state=expected)
    assert uniform(0, 1).sample(random.Random(2)) == uniform(0, 1).sample(random_state=random.Random(2))  # older form
    with pytest.raises(TypeError, match="random_state must be an int seed"):  # Ray: TypeError (SeedSequence)
        uniform(0, 1).sample(random_state="x")


@pytest.mark.parametrize("size", [0, -1, 1.5, True])
def test_domain_sample_bad_size(size: Any) -> None:
    # Ray: size=0 IndexError, size=-1 ValueError, size=1.5 TypeError (from numpy); audition one ValueError
    with pytest.raises(ValueError, match="size must be an integer >= 1"):
        uniform(0, 1).sample(size=size)


def test_sample_from_sample_passes_config() -> None:
    # Ray: fn(config); a function reading spec.config.x is retried with a spec (Ray warns it is deprecated)
    assert sample_from(lambda spec: spec.config.x + 1).sample(config={"x": 3}) == 4
    assert sample_from(lambda config: config["x"] + 1).sample(config={"x": 3}) == 4
    assert sample_from(lambda config: config["x"] + 1).sample(config=[{"x": 1}, {"x": 2}], size=2) == [2, 3]
    with pytest.raises(AttributeError):  # Ray: AttributeError 'NoneType' object has no attribute 'x'
        sample_from(lambda spec: spec.config.x).sample()
    assert isinstance(uniform(0, 1).sample({"x": 1}), float)  # other domains ignore config, as Ray's
    with pytest.raises(SearchSpaceError, match="cannot be sampled on its own"):
        grid_search([1, 2]).sample()
