"""HyperOptSearch as Ray Tune 2.60's: the same suggestions for the same seed, the same errors, resumable.

Every expected value was recorded from ``ray.tune.search.hyperopt.HyperOptSearch`` (Ray 2.60.0, hyperopt
0.3.0) driving the same spaces; no test imports Ray.
"""

from __future__ import annotations

import math
from typing import Any

import pytest

from actors import search as tune
from actors.search.hyperopt import HyperOptSearch
from tests._lean import lazy, needs

pytestmark = needs("hyperopt")
hyperopt = lazy("hyperopt")  # (which brings SciPy: imported by the tests, tests/_lean.py)


def _space() -> dict[str, Any]:
    return {"x": tune.uniform(-10, 10), "y": tune.loguniform(1e-3, 1), "n": tune.randint(1, 10),
            "q": tune.quniform(0, 1, 0.1), "c": tune.choice(["a", "b", "c"]), "k": tune.qrandint(2, 20, 2),
            "z": tune.randn(0, 1), "const": 5, "nested": {"u": tune.uniform(0, 1)},
            "ql": tune.qloguniform(1e-2, 10, 0.01), "li": tune.lograndint(1, 100), "qz": tune.qrandn(0, 2, 0.5),
            "qli": tune.qlograndint(1, 64, 4)}


def _loss(c: dict[str, Any]) -> float:
    return ((c["x"] - 1) ** 2 + math.log(c["y"]) ** 2 / 10 + c["n"] + c["q"] + {"a": 0, "b": 1, "c": 2}[c["c"]]
            + c["nested"]["u"])


def _drive(searcher: HyperOptSearch, n: int, first: int = 0) -> list[dict[str, Any]]:
    """Ray's recording loop: suggest, then complete (trial 5 failed, the others told their loss)."""
    got = []
    for i in range(first, first + n):
        config = searcher.suggest(f"t{i}")
        assert isinstance(config, dict)
        got.append(config)
        if i == 5:
            searcher.on_trial_complete(f"t{i}", None, error=True)
        else:
            searcher.on_trial_complete(f"t{i}", {"loss": _loss(config)})
    return got


def _searcher(**kwargs: Any) -> HyperOptSearch:
    searcher = HyperOptSearch(metric="loss", mode=kwargs.pop("mode", "min"), random_state_seed=42, **kwargs)
    searcher.set_search_properties(None, None, _space())
    return searcher


def _short(c: dict[str, Any]) -> dict[str, Any]:
    return {k: c[k] for k in ("x", "c", "k", "li", "qz")}


# Recorded from Ray 2.60's HyperOptSearch (hyperopt 0.3.0), random_state_seed=42, the space of _space();
# trial 5 failed (error=True), the others were told loss(config)
RAY_MIN3 = [{'c': 'c',
             'const': 5,
             'k': 6,
             'li': 28,
             'n': 8,
             'nested': {'u': 0.12139660393401264},
             'q': 0.7000000000000001,
             'ql': 0.06,
             'qli': 20,
             'qz': -3.0,
             'x': 5.87233820160278,
             'y': 0.6739295097973941,
             'z': -1.1152309013391957},
            {'c': 'c',
             'const': 5,
             'k': 18,
             'li': 3,
             'n': 8,
             'nested': {'u': 0.42254156440315904},
             'q': 0.6000000000000001,
             'ql': 2.64,
             'qli': 0,
             'qz': 2.5,
             'x': 3.8591113920973434,
             'y': 0.045874102248781544,
             'z': -1.2528768325688784},
            {'c': 'c',
             'const': 5,
             'k': 4,
             'li': 6,
             'n': 3,
             'nested': {'u': 0.8495937808324598},
             'q': 0.5,
             'ql': 0.03,
             'qli': 4,
             'qz': 0.0,
             'x': -9.448434518274285,
             'y': 0.03130128220488431,
             'z': 0.18424388135673997},
            {'c': 'b',
             'const': 5,
             'k': 18,
             'li': 1,
             'n': 8,
             'nested': {'u': 0.3595812130900655},
             'q': 0.0,
             'ql': 9.43,
             'qli': 0,
             'qz': 3.5,
             'x': -2.778898705772248,
             'y': 0.001322861591492185,
             'z': -1.2977627439153256},
            {'c': 'a',
             'const': 5,
             'k': 18,
             'li': 1,
             'n': 5,
             'nested': {'u': 0.8921025723746364},
             'q': 1.0,
             'ql': 5.68,
             'qli': 0,
             'qz': 2.5,
             'x': 9.932857030777352,
             'y': 0.07472712453586162,
             'z': -1.8805700808747883},
            {'c': 'c',
             'const': 5,
             'k': 12,
             'li': 6,
             'n': 6,
             'nested': {'u': 0.5626554736230736},
             'q': 0.0,
             'ql': 0.68,
             'qli': 4,
             'qz': 2.0,
             'x': 1.4573426253342356,
             'y': 0.0010667682230063712,
             'z': 0.9910203438207339},
            {'c': 'c',
             'const': 5,
             'k': 12,
             'li': 5,
             'n': 6,
             'nested': {'u': 0.5667174414342538},
             'q': 0.1,
             'ql': 0.74,
             'qli': 4,
             'qz': 2.0,
             'x': 0.21633030769488215,
             'y': 0.0010378277993913702,
             'z': 0.733130529024972},
            {'c': 'c',
             'const': 5,
             'k': 12,
             'li': 68,
             'n': 1,
             'nested': {'u': 0.63081812180987},
             'q': 0.0,
             'ql': 0.54,
             'qli': 52,
             'qz': 1.5,
             'x': -4.737757216028794,
             'y': 0.0010866329531509192,
             'z': 1.0530583505152162}]
RAY_POINTS = [{'c': 'b',
               'const': 5,
               'k': 4,
               'li': 10,
               'n': 3,
               'nested': {'u': 0.5},
               'q': 0.5,
               'ql': 1.0,
               'qli': 8,
               'qz': 0.5,
               'x': 1.0,
               'y': 0.01,
               'z': 0.0},
              {'c': 'c',
               'const': 5,
               'k': 6,
               'li': 5,
               'n': 2,
               'nested': {'u': 0.25},
               'q': 0.2,
               'ql': 2.0,
               'qli': 16,
               'qz': 1.0,
               'x': -1.0,
               'y': 0.1,
               'z': 1.0},
              {'c': 'b',
               'const': 5,
               'k': 2,
               'li': 88,
               'n': 8,
               'nested': {'u': 0.9281503523448622},
               'q': 0.9,
               'ql': 0.01,
               'qli': 0,
               'qz': -0.5,
               'x': 9.934528422338499,
               'y': 0.0011901843157868883,
               'z': -0.32305396687951027},
              {'c': 'b',
               'const': 5,
               'k': 18,
               'li': 1,
               'n': 2,
               'nested': {'u': 0.7736835595654697},
               'q': 0.7000000000000001,
               'ql': 0.1,
               'qli': 0,
               'qz': -2.0,
               'x': -9.410448038476918,
               'y': 0.002035423860551712,
               'z': 0.34851019999802935},
              {'c': 'a',
               'const': 5,
               'k': 14,
               'li': 51,
               'n': 6,
               'nested': {'u': 0.01731028049344807},
               'q': 0.0,
               'ql': 9.55,
               'qli': 48,
               'qz': 4.0,
               'x': 7.06539786590475,
               'y': 0.5976900719190767,
               'z': 0.19447063601185838}]
RAY_MAX3_SHORT = [{'x': 5.87233820160278, 'c': 'c', 'k': 6, 'li': 28, 'qz': -3.0},
                  {'x': 3.8591113920973434, 'c': 'c', 'k': 18, 'li': 3, 'qz': 2.5},
                  {'x': -9.448434518274285, 'c': 'c', 'k': 4, 'li': 6, 'qz': 0.0},
                  {'x': -9.44715127783128, 'c': 'b', 'k': 2, 'li': 1, 'qz': -0.0},
                  {'x': -9.696752700535274, 'c': 'a', 'k': 14, 'li': 62, 'qz': -0.0},
                  {'x': -3.671132549707747, 'c': 'a', 'k': 16, 'li': 51, 'qz': 1.0},
                  {'x': -3.4881288612624344, 'c': 'a', 'k': 16, 'li': 99, 'qz': -1.0},
                  {'x': -1.697504683967205, 'c': 'a', 'k': 12, 'li': 83, 'qz': -1.0}]
RAY_DEFAULT_SHORT = [{'x': 5.87233820160278, 'c': 'c', 'k': 6, 'li': 28, 'qz': -3.0},
                     {'x': 3.8591113920973434, 'c': 'c', 'k': 18, 'li': 3, 'qz': 2.5},
                     {'x': -9.448434518274285, 'c': 'c', 'k': 4, 'li': 6, 'qz': 0.0},
                     {'x': -6.547854894226748, 'c': 'b', 'k': 6, 'li': 8, 'qz': -0.0}]
RAY_GAMMA_SHORT = [{'x': 5.87233820160278, 'c': 'c', 'k': 6, 'li': 28, 'qz': -3.0},
                   {'x': 3.8591113920973434, 'c': 'c', 'k': 18, 'li': 3, 'qz': 2.5},
                   {'x': -9.725631491888999, 'c': 'a', 'k': 18, 'li': 1, 'qz': 3.5},
                   {'x': -3.3692677760574714, 'c': 'b', 'k': 18, 'li': 2, 'qz': 2.5},
                   {'x': 9.932857030777352, 'c': 'c', 'k': 12, 'li': 6, 'qz': 2.0},
                   {'x': -2.7515276147326886, 'c': 'b', 'k': 18, 'li': 2, 'qz': 2.5}]

POINTS = [
    {"x": 1.0, "y": 0.01, "n": 3, "q": 0.5, "c": "b", "k": 4, "z": 0.0, "nested/u": 0.5, "ql": 1.0, "li": 10,
     "qz": 0.5, "qli": 8},
    {"x": -1.0, "y": 0.1, "n": 2, "q": 0.2, "c": "c", "k": 6, "z": 1.0, "nested/u": 0.25, "ql": 2.0, "li": 5,
     "qz": 1.0, "qli": 16},
]


def test_the_same_seed_suggests_what_ray_suggests() -> None:
    assert _drive(_searcher(n_initial_points=3), 8) == RAY_MIN3
    assert [_short(c) for c in _drive(_searcher(n_initial_points=3, mode="max"), 8)] == RAY_MAX3_SHORT
    assert [_short(c) for c in _drive(_searcher(), 4)] == RAY_DEFAULT_SHORT
    assert [_short(c) for c in _drive(_searcher(n_initial_points=2, gamma=0.5), 6)] == RAY_GAMMA_SHORT


def test_points_to_evaluate_come_first_then_tpe_as_in_ray() -> None:
    assert _drive(_searcher(n_initial_points=2, points_to_evaluate=POINTS), 5) == RAY_POINTS
    # audition also takes a nested parameter as a nested dict (Ray 2.60 fails at its first TPE suggestion)
    nested = [{k: v for k, v in p.items() if k != "nested/u"} | {"nested": {"u": p["nested/u"]}} for p in POINTS]
    assert _drive(_searcher(n_initial_points=2, points_to_evaluate=nested), 5) == RAY_POINTS


def test_values_have_rays_types() -> None:
    searcher = HyperOptSearch(metric="l", mode="min", random_state_seed=3, n_initial_points=1)
    searcher.set_search_properties(None, None, {
        "n": tune.randint(1, 10), "k": tune.qrandint(2, 20, 2), "li": tune.lograndint(1, 100),
        "qli": tune.qlograndint(1, 64, 4), "q": tune.quniform(0, 1, 0.1), "c": tune.choice([1, "a", 2.5])})
    got = []
    for i in range(3):
        config = searcher.suggest(f"t{i}")
        assert isinstance(config, dict)
        searcher.on_trial_complete(f"t{i}", {"l": 1.0 * i})
        got.append({k: (v, type(v).__name__) for k, v in config.items()})
    assert got == [  # recorded
        {"c": ("a", "str"), "k": (12, "int"), "li": (6, "int"), "n": (3, "int"), "q": (0.1, "float"),
         "qli": (48, "int")},
        {"c": ("a", "str"), "k": (12, "int"), "li": (5, "int"), "n": (2, "int"), "q": (0.1, "float"),
         "qli": (48, "int")},
        {"c": (1, "int"), "k": (6, "int"), "li": (83, "int"), "n": (8, "int"), "q": (0.4, "float"),
         "qli": (20, "int")}]
    assert list(got[0]) == ["c", "k", "li", "n", "q", "qli"]  # HyperOpt's sorted keys, as Ray's searcher (recorded)


def test_a_mode_alone_searches_rays_anonymous_metric() -> None:
    searcher = HyperOptSearch(mode="min", random_state_seed=0)
    searcher.set_search_properties(None, None, {"a": tune.uniform(0, 1)})
    assert searcher.metric == "_metric"
    assert searcher.suggest("t1") == {"a": 0.38255389159742137}  # recorded


def test_a_second_space_is_refused_as_in_ray() -> None:
    searcher = HyperOptSearch(metric="l", mode="min", random_state_seed=0)
    assert searcher.set_search_properties(None, None, {"a": tune.uniform(0, 1)})
    assert searcher.set_search_properties(None, None, {"a": tune.uniform(0, 1)}) is False


@pytest.mark.parametrize(("space", "error", "match"), [
    ({"a": tune.grid_search([1, 2])}, ValueError, "grid_search at 'a' cannot be converted"),
    ({"a": tune.sample_from(lambda s: 1), "b": tune.uniform(0, 1)}, ValueError, "sample_from at 'a'"),
    ({"a": 1}, RuntimeError, "no search space.*constants alone"),
])
def test_spaces_ray_refuses_are_refused_with_the_reason(space: dict[str, Any], error: type, match: str) -> None:
    # Ray 2.60: ValueError (grid_search), ValueError (sample_from: "type `Function`"), RuntimeError (constants)
    with pytest.raises(error, match=match):
        HyperOptSearch(metric="l", mode="min").set_search_properties(None, None, space)


def test_bad_arguments_and_results_are_named() -> None:
    with pytest.raises(ValueError, match="mode must be 'min' or 'max'"):  # Ray: AssertionError
        HyperOptSearch(metric="l", mode="best")
    for bad in ({"n_initial_points": -1}, {"gamma": 1.5}, {"points_to_evaluate": {"a": 1}}):
        with pytest.raises(ValueError, match=next(iter(bad))):
            HyperOptSearch(metric="l", mode="min", **bad)
    with pytest.raises(TypeError, match="random_state_seed"):
        HyperOptSearch(random_state_seed="7")  # type: ignore[arg-type]
    searcher = HyperOptSearch(random_state_seed=0)
    searcher.set_search_properties(None, None, {"a": tune.uniform(0, 1)})
    with pytest.raises(RuntimeError, match="needs metric and mode"):  # Ray: RuntimeError too
        searcher.suggest("t1")
    searcher = HyperOptSearch(metric="l", mode="min", random_state_seed=0)
    searcher.set_search_properties(None, None, {"a": tune.uniform(0, 1)})
    searcher.suggest("t1")
    with pytest.raises(RuntimeError, match="has no 'l'"):  # Ray: RuntimeError "expected to see the metric `l`"
        searcher.on_trial_complete("t1", {"other": 1})


def test_bad_points_are_named() -> None:
    # Ray 2.60: ValueError "Did not find category with value `zz` in hyperopt parameter `c`"
    with pytest.raises(ValueError, match="'zz' for 'c', which is not one of its choices"):
        HyperOptSearch(metric="l", mode="min", points_to_evaluate=[{"c": "zz"}]).set_search_properties(
            None, None, {"c": tune.choice(["a", "b"])})
    # Ray 2.60: ValueError "HyperOpt encountered a GarbageCollected switch argument" at the point's suggestion
    searcher = HyperOptSearch(metric="l", mode="min", random_state_seed=0, points_to_evaluate=[{"a": 0.5}])
    searcher.set_search_properties(None, None, {"a": tune.uniform(0, 1), "b": tune.uniform(0, 1)})
    with pytest.raises(ValueError, match="lacks a searched parameter"):
        searcher.suggest("t1")


def test_a_restored_searcher_suggests_what_the_original_would_have(tmp_path: Any) -> None:
    original = _searcher(n_initial_points=3, points_to_evaluate=POINTS[:1])
    _drive(original, 4)
    live = original.suggest("t4")  # saved while a trial is live: its result still counts after the restore
    saved = original.save()
    original.save(str(tmp_path / "searcher.pkl"))  # Ray's save(path) / restore(path) too
    original.on_trial_complete("t4", {"loss": _loss(live)})
    rest = _drive(original, 4, first=5)
    for state in (saved, str(tmp_path / "searcher.pkl")):
        restored = HyperOptSearch()
        restored.restore(state)
        restored.on_trial_complete("t4", {"loss": _loss(live)})
        assert _drive(restored, 4, first=5) == rest


def test_create_searcher_builds_it() -> None:
    made = tune.create_searcher("hyperopt", metric="loss", mode="min", random_state_seed=1)
    assert type(made) is HyperOptSearch


def _fit_trainable(config: dict[str, Any]) -> None:
    from actors import report

    for i in range(2):
        report({"loss": (config["x"] - 1) ** 2 + (0 if config["c"] == "a" else 1) + i})


def test_a_tuner_runs_the_trials_ray_runs(tmp_path: Any) -> None:
    from actors import RunConfig, TuneConfig, Tuner

    grid = Tuner(_fit_trainable,
                 param_space={"x": tune.uniform(-5, 5), "c": tune.choice(["a", "b"]), "const": 5,
                              "nest": {"w": tune.uniform(0, 1), "k": 2}},
                 tune_config=TuneConfig(metric="loss", mode="min", num_samples=6, max_concurrent_trials=1,
                                        search_alg=HyperOptSearch(random_state_seed=7, n_initial_points=2)),
                 run_config=RunConfig(storage=str(tmp_path), name="hx", system="simple", verbose=0)).fit()
    got = [(list(r.config), r.config["x"], r.config["c"], r.config["nest"]["w"], r.metrics["experiment_tag"],
            r.metrics["loss"]) for r in grid]
    keys = ["x", "c", "const", "nest"]
    assert got == [  # recorded from Ray 2.60's Tuner (its trials in order)
        (keys, 1.6936195939068446, "a", 0.375237570642879, "1_c=a,const=5,k=2,w=0.3752,x=1.6936", 1.481108141051496),
        (keys, -0.8823681152031329, "b", 0.7920219149500424, "2_c=b,const=5,k=2,w=0.7920,x=-0.8824",
         5.5433097211333955),
        (keys, 4.872083996163018, "a", 0.02510629796770414, "3_c=a,const=5,k=2,w=0.0251,x=4.8721",
         15.993034473341766),
        (keys, 4.507526788914093, "a", 0.21033007854171074, "4_c=a,const=5,k=2,w=0.2103,x=4.5075",
         13.302744174950005),
        (keys, -4.572836533940733, "a", 0.5376660164652189, "5_c=a,const=5,k=2,w=0.5377,x=-4.5728",
         32.05650703402456),
        (keys, 0.9768799144196443, "a", 0.9856021209023575, "6_c=a,const=5,k=2,w=0.9856,x=0.9769",
         1.000534538357243)]


def test_its_own_space_takes_tuneconfigs_metric_and_the_param_spaces_constants(tmp_path: Any) -> None:
    """Ray 2.60 fails such a run at the first suggestion (recorded: RuntimeError, the metric (None) ... not set);
    audition takes TuneConfig's metric and mode where the searcher has none, as OptunaSearch does."""
    from actors import RunConfig, TuneConfig, Tuner, report

    def trainable(config: dict[str, Any]) -> None:
        report({"loss": config["x"] + config["offset"]})

    grid = Tuner(trainable, param_space={"offset": 10},
                 tune_config=TuneConfig(metric="loss", mode="min", num_samples=3,
                                        search_alg=HyperOptSearch(space={"x": tune.uniform(0, 1)},
                                                                  random_state_seed=1)),
                 run_config=RunConfig(storage=str(tmp_path), system="simple", verbose=0)).fit()
    # recorded from Ray 2.60 with metric="loss", mode="min" given to the searcher too
    assert sorted(r.config["x"] for r in grid) == sorted([0.6766088018999444, 0.4196988492136484, 0.4043474189104247])
    assert {r.config["offset"] for r in grid} == {10}


def test_an_aborted_experiment_resumes_with_the_suggestions_it_would_have_made() -> None:
    from actors import TuneConfig
    from actors.testing import Faults, simulate

    def curve(config: dict[str, Any], i: int) -> dict[str, Any]:
        return {"loss": (config["x"] - 1) ** 2 + i * 0.01, "time_this_iter_s": 1.0}

    def run(**kwargs: Any) -> Any:
        return simulate(curve, {"x": tune.uniform(-5, 5)},
                        TuneConfig(metric="loss", mode="min", num_samples=10, max_concurrent_trials=1,
                                   search_alg=HyperOptSearch(random_state_seed=3, n_initial_points=3)),
                        max_iterations=4, cpus=1, **kwargs)

    whole = run()
    aborted = run(faults=Faults(abort_at_s=17.5))
    assert aborted.error is not None and "simulated abort" in aborted.error
    assert aborted.results is not None and len(aborted.results) < 10, "the abort ends the first run early"
    resumed = simulate(curve, restore=aborted.experiment_path, max_iterations=4, cpus=1)
    assert whole.results is not None and resumed.results is not None
    expected = sorted(r.config["x"] for r in whole.results)
    assert sorted(r.config["x"] for r in resumed.results) == expected
    assert len(expected) == 10
    for sim in (whole, aborted, resumed):
        sim.discard()


def test_its_own_space_gives_configs_in_hyperopts_order_after_the_constants_as_ray(tmp_path: Any) -> None:
    from actors import RunConfig, TuneConfig, Tuner, report

    def trainable(config: dict[str, Any]) -> None:
        report({"loss": config["b"]})

    space = {"b": tune.uniform(0, 1), "a": tune.uniform(0, 1), "n": {"y": 1, "x": hyperopt.hp.uniform("n/x", 0, 1)}}
    grid = Tuner(trainable, param_space={"z": 1, "b0": 2},
                 tune_config=TuneConfig(num_samples=2, search_alg=HyperOptSearch(space=space, metric="loss",
                                                                                 mode="min", random_state_seed=1)),
                 run_config=RunConfig(storage=str(tmp_path), system="simple", verbose=0)).fit()
    got = [(list(r.config), list(r.config["n"]), r.config, r.metrics["experiment_tag"]) for r in grid]
    assert got == [  # recorded from Ray 2.60's Tuner
        (["z", "b0", "a", "b", "n"], ["x", "y"],
         {"z": 1, "b0": 2, "a": 0.8823516765458351, "b": 0.4311101200577018, "n": {"x": 0.6766088018999444, "y": 1}},
         "1_a=0.8824,b=0.4311,b0=2,x=0.6766,y=1,z=1"),
        (["z", "b0", "a", "b", "n"], ["x", "y"],
         {"z": 1, "b0": 2, "a": 0.06095039042163064, "b": 0.4210625756407086, "n": {"x": 0.4196988492136484, "y": 1}},
         "2_a=0.0610,b=0.4211,b0=2,x=0.4197,y=1,z=1")]


def test_convert_search_space_as_rays() -> None:
    space = {"x": tune.uniform(0, 1), "c": 5, "n": {"y": tune.uniform(-1, 2), "z": "s"}}
    converted = HyperOptSearch.convert_search_space(space)
    # recorded from Ray 2.60: {'x': Apply, 'c': 5, 'n': {'y': Apply, 'z': 's'}}, labelled by path
    assert converted["c"] == 5 and converted["n"]["z"] == "s"
    labels = {node.pos_args[0].pos_args[0].obj for node in (converted["x"], converted["n"]["y"])}
    assert labels == {"x", "n/y"}
    assert HyperOptSearch.convert_search_space({"c": 5}) == {}  # recorded: {}


def test_choices_whose_categories_share_a_key_are_named() -> None:
    # Ray 2.60: hyperopt's DuplicateLabel("c/u") from deep inside HyperOpt (recorded)
    space = {"c": tune.choice([{"u": tune.uniform(0, 1)}, {"u": tune.uniform(0, 2)}])}
    with pytest.raises(ValueError, match=r"both labelled 'c/u'.*different names"):
        HyperOptSearch(metric="l", mode="min").set_search_properties(None, None, space)
