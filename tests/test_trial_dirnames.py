"""Trial directories named as Ray 2.60 names them by default (``actors/_engine/naming.py``).

Every expected name here was recorded from Ray 2.60 (``/work/rayvenv``, 2026-12-04) by probe
scripts running ``tune.Tuner(trainable, param_space=..., tune_config=..., run_config=tune.RunConfig(
name=..., storage_path=...)).fit()`` and printing ``os.path.basename(result.path)`` for each result;
the trial id is masked as ``<id>`` and the date as ``<date>``. The probes also showed: the name is
given at the trial's first start (with ``max_concurrent_trials=1`` and 3 s trials, the second trial's
date was 4 s after the first's), its date is local time (``TZ=America/New_York``: ``18-33-50`` at
23:33:50 UTC), a PBT exploit does not rename it, and a trial that never reported has an empty
``result.json``.
"""

from __future__ import annotations

import calendar
import functools
import os
import random
import re
import time
from collections.abc import Iterator
from typing import Any

import pytest

import actors as tune
from actors import ExperimentAnalysis, RunConfig, TuneConfig, Tuner
from actors._driver.errors import ConfigError
from actors._engine.naming import ray_dirname, stamp
from actors.testing import simulate
from actors.testing.simulate import SIM_WALL_START

DATE = re.compile(r"\d{4}-\d\d-\d\d_\d\d-\d\d-\d\d")
STAMP = "%Y-%m-%d_%H-%M-%S"


def train(config: dict[str, Any], data: Any = None) -> None:
    tune.report({"x": 1})


class CallableTrainable:
    """A callable object as the trainable: Ray 2.60 names its trials DEFAULT_<id> (recorded)."""

    def __call__(self, config: dict[str, Any]) -> None:
        tune.report({"x": 1})


class MyTrainable(tune.Trainable):
    def step(self) -> dict[str, Any]:
        return {"x": 1, "done": True}


def _masked(r: Any) -> str:
    name = os.path.basename(r.path)
    return DATE.sub("<date>", name.replace(r.trial_id, "<id>"))


def _names(trainable: Any, space: dict[str, Any], root: str, **tc: Any) -> list[str]:
    grid = Tuner(trainable, param_space=space, tune_config=TuneConfig(**tc),
                 run_config=RunConfig(name="e", storage_path=root, verbose=0, system="simple")).fit()
    assert not grid.errors
    for r in grid:  # the files are there, under that name
        assert os.path.isfile(os.path.join(r.path, "params.json")), r.path
    return sorted(_masked(r) for r in grid)


LONG = {f"very_long_parameter_name_{i}": tune.grid_search([0.123456789]) for i in range(8)}
# (param space, Ray 2.60's names)
CONFIGS = {
    "grid": ({"x": tune.grid_search([1, 2]), "s": "a"}, ["train_<id>_0_x=1_<date>", "train_<id>_1_x=2_<date>"]),
    "nested": ({"a": {"b": tune.grid_search([1, 2.5]), "c": {"d": tune.grid_search(["x y", "z"])}}},
               ["train_<id>_0_b=1,d=x_y_<date>", "train_<id>_1_b=2.5000,d=x_y_<date>",
                "train_<id>_2_b=1,d=z_<date>", "train_<id>_3_b=2.5000,d=z_<date>"]),
    "list": ({"l": tune.grid_search([[1, 2], (3, "a")])}, ["train_<id>_0_l=1_2_<date>", "train_<id>_1_l=3_a_<date>"]),
    "long": (LONG, ["train_<id>_0_very_long_parameter_name_0=0.1235,very_long_parameter_name_1=0.1235,"
                    "very_long_parameter_name_2=0.1235,very_lon_<date>"]),
    "chars": ({"k": tune.grid_search(['a/b(c)<d>:e"f\\g|h?i*j'])}, ["train_<id>_0_k=a_b_c_d_e_f_g_h_i_j_<date>"]),
    "empty": ({}, ["train_<id>_0_<date>"]),
    "env": ({"env": "CartPole-v1", "x": tune.grid_search([1])}, ["train_CartPole-v1_<id>_0_x=1_<date>"]),
}


@pytest.mark.parametrize("case", sorted(CONFIGS))
def test_a_trial_directory_is_named_as_ray_names_it(case: str, tmp_path: Any) -> None:
    space, ray_names = CONFIGS[case]
    assert _names(train, space, str(tmp_path)) == ray_names


@pytest.fixture
def registered() -> Iterator[str]:
    from actors._driver import registry

    tune.register_trainable("my_registered", train)
    yield "my_registered"
    registry._TRAINABLES.pop("my_registered", None)


def test_the_trainables_name_starts_it(tmp_path: Any, registered: str) -> None:
    x = {"x": tune.grid_search([1])}
    cases = [(MyTrainable, "MyTrainable"), (tune.with_parameters(train, data=[1, 2]), "train"),
             (tune.with_resources(train, {"cpu": 1}), "train"),
             (tune.with_resources(tune.with_parameters(train, data=1), {"cpu": 1}), "train"),
             (registered, "my_registered"), (lambda config: tune.report({"x": 1}), "lambda"),
             # recorded from Ray 2.60 (2026-12-06): a partial is named after its function, a callable object DEFAULT
             (functools.partial(train, data=1), "train"), (CallableTrainable(), "DEFAULT")]
    for i, (trainable, ray_prefix) in enumerate(cases):
        assert _names(trainable, x, str(tmp_path / str(i))) == [f"{ray_prefix}_<id>_0_x=1_<date>"], ray_prefix


def test_a_custom_trial_name_is_cut_and_stripped_as_in_ray(tmp_path: Any) -> None:
    x = {"x": tune.grid_search([1])}
    for i, (made, ray_name) in enumerate([("custom/name", "custom_name_0_x=1_<date>"),
                                          ('a(b)c:d<e>|f?g*h"i\\j', "a_b_c_d_e__f_g_h_i_j_0_x=1_<date>"),
                                          ("n" * 140, "n" * 130 + "_<date>")]):
        assert _names(train, x, str(tmp_path / str(i)), trial_name_creator=lambda t, m=made: m) == [ray_name]


def test_tune_max_len_identifier_cuts_the_name(tmp_path: Any, monkeypatch: Any) -> None:
    monkeypatch.setenv("TUNE_MAX_LEN_IDENTIFIER", "20")
    assert _names(train, {"x": tune.grid_search([1])}, str(tmp_path)) == ["train_<id>_0__<date>"]  # Ray's
    monkeypatch.setenv("TUNE_MAX_LEN_IDENTIFIER", "short")
    with pytest.raises(ConfigError, match="TUNE_MAX_LEN_IDENTIFIER='short' is not an integer"):
        _names(train, {}, str(tmp_path / "bad"))


@pytest.fixture
def new_york() -> Iterator[None]:
    before = os.environ.get("TZ")
    os.environ["TZ"] = "America/New_York"
    time.tzset()
    yield
    if before is None:
        os.environ.pop("TZ")
    else:
        os.environ["TZ"] = before
    time.tzset()


def test_the_stamp_is_the_calendars() -> None:
    edges = [0, 951782400, 951868799, 4107542400, 1796427230, 253402300799]  # 2000-02-29, 2100-03-01, 9999
    rng = random.Random(7)
    for s in edges + [rng.randrange(0, 253402300800) for _ in range(2000)]:
        assert stamp(s) == time.strftime(STAMP, time.gmtime(s)), s


def test_the_date_is_the_local_time(tmp_path: Any, new_york: None) -> None:
    at = calendar.timegm((2026, 12, 4, 23, 33, 50)) + 0.7  # recorded with TZ=America/New_York at this UTC time
    assert ray_dirname("slow_28eff_00000", "0_x=1", at, -5 * 3600) == "slow_28eff_00000_0_x=1_2026-12-04_18-33-50"
    before = int(time.time())
    (r,) = Tuner(train, run_config=RunConfig(name="e", storage_path=str(tmp_path), verbose=0, system="simple")).fit()
    after = time.time()
    match = DATE.search(os.path.basename(r.path))
    assert match is not None
    assert before <= time.mktime(time.strptime(match.group(0), STAMP)) <= after  # New York's time


def _curve(config: dict[str, Any], i: int) -> dict[str, Any]:
    return {"loss": 1.0 / i, "time_this_iter_s": 10.0}


def _sim_dates(**kw: Any) -> dict[str, float]:
    sim = simulate(_curve, {"x": tune.grid_search([1, 2])}, TuneConfig(metric="loss", mode="min"),
                   max_iterations=3, cpus=1, **kw)
    assert sim.results is not None and not sim.results.errors
    out = {}
    for r in sim.results:
        match = DATE.search(os.path.basename(r.path))
        x = r.config["x"]
        assert match is not None and _masked(r) == f"_curve_<id>_{x - 1}_x={x}_<date>", r.path
        out[r.config["x"]] = calendar.timegm(time.strptime(match.group(0), STAMP))  # the simulation's: UTC
    return out


def test_a_trial_waiting_for_room_is_dated_when_it_starts_in_simulated_time() -> None:
    dates = _sim_dates()
    assert int(SIM_WALL_START) <= dates[1] < SIM_WALL_START + 5  # the simulated clock, not this machine's
    assert dates[2] - dates[1] >= 30  # after the first trial's three 10 s steps (Ray's: at its first start)
    assert _sim_dates() == dates  # deterministic


def test_two_trials_cut_to_the_same_name_get_different_directories() -> None:
    sim = simulate(_curve, {"x": tune.grid_search([1, 2])},
                   TuneConfig(metric="loss", mode="min", trial_name_creator=lambda t: "n" * 140), max_iterations=1)
    assert sim.results is not None
    names = sorted(os.path.basename(r.path) for r in sim.results)
    assert names[0] == "n" * 130 + "_" + DATE.search(names[0]).group(0)  # type: ignore[union-attr]
    assert names[1].startswith(names[0] + "_") and len(names[1]) == len(names[0]) + 5  # Ray: 4 hex digits


def silent(config: dict[str, Any]) -> None:
    return None


def test_a_trial_that_never_reported_has_an_empty_result_json(tmp_path: Any) -> None:
    (r,) = Tuner(silent, run_config=RunConfig(name="e", storage_path=str(tmp_path), verbose=0,
                                              system="simple")).fit()
    assert os.path.getsize(os.path.join(r.path, "result.json")) == 0  # Ray's: 0 bytes
    assert r.metrics_history == [] and r.metrics_dataframe.empty  # Ray's: an empty DataFrame
    (t,) = ExperimentAnalysis(str(tmp_path / "e")).trials
    assert t.path == r.path
    restored = Tuner.restore(str(tmp_path / "e"), silent).get_results()
    assert [x.path for x in restored] == [r.path] and restored[0].metrics_history == []


# trial.custom_dirname, recorded from Ray 2.60 (/work/rayvenv, 2026-12-05) by a Callback printing
# trial.custom_dirname and os.path.basename(trial.path) in on_trial_start and on_trial_result, for
# Tuner(f, param_space={"x": grid_search([1, 2])}).fit() without and with
# TuneConfig(trial_dirname_creator=lambda t: f"mydir_{t.trial_id}"): without, None at both hooks with the
# path's name f_<id>_0_x=1_<date> (the directory holding params.json and result.json); with, "mydir_<id>"
# and the path's name the same. A run whose trials failed, restored with Tuner.restore(path, f,
# resume_errored=True), showed the same at the restarted trials' hooks (None; "mydir_<id>"), as did the finished trial
# in their ``trials`` list.


class _Seen(tune.Callback):
    def __init__(self) -> None:
        self.seen: list[tuple[str, str, str | None, str, bool]] = []

    def _note(self, hook: str, trial: Any) -> None:
        self.seen.append((hook, trial.trial_id, trial.custom_dirname, os.path.basename(trial.path),
                          os.path.isfile(os.path.join(trial.path, "params.json"))))

    def on_trial_start(self, iteration: int, trials: Any, trial: Any, **info: Any) -> None:
        self._note("start", trial)
        for other in trials:  # (after a restore, a finished trial's is the saved state's)
            self._note("listed", other)

    def on_trial_result(self, iteration: int, trials: Any, trial: Any, result: Any, **info: Any) -> None:
        self._note("result", trial)


def _mydir(trial: Any) -> str:
    return f"mydir_{trial.trial_id}"


def _fails_first(config: dict[str, Any]) -> None:
    if config["flag"] and not os.path.exists(config["flag"]):
        raise RuntimeError("the first run fails")
    tune.report({"x": 1})


def _expect(seen: list[tuple[str, str, str | None, str, bool]], paths: dict[str, str], creator: bool) -> None:
    assert {h for h, *_ in seen} == {"start", "result", "listed"}
    for hook, tid, custom, base, has_params in seen:
        assert custom == (f"mydir_{tid}" if creator else None)  # Ray's
        if hook != "listed" or has_params:  # (a listed trial may not have started yet)
            assert base == os.path.basename(paths[tid]) and has_params  # trial.path: where its files are
            assert creator or DATE.search(base)


@pytest.mark.parametrize("creator", [False, True])
def test_custom_dirname_is_only_the_creators_as_in_ray(creator: bool, tmp_path: Any) -> None:
    seen = _Seen()
    grid = Tuner(train, param_space={"x": tune.grid_search([1, 2])},
                 tune_config=TuneConfig(trial_dirname_creator=_mydir if creator else None),
                 run_config=RunConfig(name="e", storage_path=str(tmp_path), verbose=0, system="simple",
                                      callbacks=[seen])).fit()
    _expect(seen.seen, {r.trial_id: r.path for r in grid}, creator)
    assert len([h for h, *_ in seen.seen if h != "listed"]) == 4
    trials = ExperimentAnalysis(str(tmp_path / "e")).trials
    assert [t.custom_dirname for t in trials] == [f"mydir_{t.trial_id}" if creator else None for t in trials]


@pytest.mark.parametrize("creator", [False, True])
def test_a_restored_trial_keeps_showing_the_creators_name_or_none(creator: bool, tmp_path: Any) -> None:
    flag = tmp_path / "flag"
    Tuner(_fails_first, param_space={"flag": tune.grid_search([str(flag), ""])},
          tune_config=TuneConfig(trial_dirname_creator=_mydir if creator else None),
          run_config=RunConfig(name="e", storage_path=str(tmp_path), verbose=0, system="simple")).fit()
    flag.touch()
    seen = _Seen()
    grid = Tuner.restore(str(tmp_path / "e"), _fails_first, resume_errored=True, callbacks=[seen]).fit()
    assert not grid.errors
    _expect(seen.seen, {r.trial_id: r.path for r in grid}, creator)
    assert [h for h, *_ in seen.seen] == ["start", "listed", "listed", "result"]  # the failed one's second run
    trials = ExperimentAnalysis(str(tmp_path / "e")).trials
    assert [t.custom_dirname for t in trials] == [f"mydir_{t.trial_id}" if creator else None for t in trials]


def test_states_saved_before_the_flag_tell_the_creators_names() -> None:
    from actors._engine.naming import saved_dirname_custom
    from actors._engine.store import TRIAL_DIRS_NAMED

    ray_default = "train_a_00000_0_x=1_2026-12-04_21-34-30"
    now = {"trial_dirs": TRIAL_DIRS_NAMED}
    assert saved_dirname_custom(now, {"dirname": "mine_2026-12-04_21-34-30", "dirname_custom": True})
    assert not saved_dirname_custom(now, {"dirname": "mine", "dirname_custom": False})
    assert not saved_dirname_custom(now, {"trial_id": "a_00000"})  # never started
    # rows named as Ray names them, written before rows said whose name it was: Ray's ends in its date
    assert not saved_dirname_custom(now, {"dirname": ray_default})
    assert not saved_dirname_custom(now, {"dirname": ray_default + "_0a1f"})
    assert saved_dirname_custom(now, {"dirname": "mydir_a_00000"})
    # older still: a row had a name only from trial_dirname_creator
    assert saved_dirname_custom({}, {"dirname": ray_default})
    assert not saved_dirname_custom({}, {"trial_id": "a_00000"})
