"""``tune.get_context()`` and the ``Trainable``'s views of its trial, as Ray Tune 2.60 gives them.

Recorded from Ray 2.60 (the same scripts): in a function trainable ``get_trial_name()`` is
``f_<trial id>``, ``get_experiment_name()`` the run's name, ``get_trial_dir()`` an existing local
directory, ``get_world_rank()`` None; in a class trainable ``training_iteration`` is 0 in ``setup``
and ``k - 1`` during the k-th ``step``, ``get_config()`` the config, ``trial_name``/``trial_id`` as
the function's; outside a trial Ray's ``Trainable`` says ``"default"`` (its ``logdir``: a new directory).
"""

from __future__ import annotations

import os
from typing import Any

import pytest

import actors as tune
from actors import RunConfig, Trainable, Tuner
from actors._driver.errors import ConfigError, TuneError


def f(config: dict[str, Any]) -> None:
    c = tune.get_context()
    try:
        c.get_metadata()
        meta = "returned"
    except DeprecationWarning:
        meta = "raised"
    tune.report({"name": c.get_trial_name(), "id": c.get_trial_id(), "dir": c.get_trial_dir(),
                 "exp": c.get_experiment_name(), "rank": c.get_world_rank(),
                 "isdir": os.path.isdir(c.get_trial_dir()), "meta": meta,
                 "train": [c.get_world_size(), c.get_local_rank(), c.get_local_world_size(), c.get_node_rank()]})


class T(Trainable):
    def setup(self, config: dict[str, Any]) -> None:
        self.seen = {"name": self.trial_name, "id": self.trial_id, "logdir": self.logdir,
                     "it": self.training_iteration, "cfg": self.get_config(), "exp": self.experiment_name}

    def step(self) -> dict[str, Any]:
        return dict(self.seen, it2=self.training_iteration)


@pytest.mark.parametrize("system", ["simple", "multiproc"])
def test_get_context_in_a_function_trainable(system: str, tmp_path: Any, no_leaks: Any) -> None:
    (r,) = Tuner(f, param_space={"x": 1},
                 run_config=RunConfig(storage=str(tmp_path), name="e", verbose=0, system=system)).fit()
    m = r.metrics
    assert m["id"] == r.trial_id and m["name"] == f"f_{r.trial_id}" and m["exp"] == "e"
    assert m["rank"] is None and m["isdir"] and m["dir"] == r.path  # local storage: the trial's own directory
    # recorded from Ray 2.60 in a Tune trial: Ray Train's sizes and ranks are None, get_metadata() raises
    # DeprecationWarning
    assert m["train"] == [None, None, None, None] and m["meta"] == "raised"


def test_a_class_trainable_sees_its_trial(tmp_path: Any) -> None:
    (r,) = Tuner(T, param_space={"x": 1},
                 run_config=RunConfig(storage=str(tmp_path), name="e2", verbose=0, system="simple",
                                      stop={"training_iteration": 2})).fit()
    m = r.metrics
    assert (m["name"], m["id"], m["exp"], m["logdir"]) == (f"T_{r.trial_id}", r.trial_id, "e2", r.path)
    assert m["it"] == 0 and m["it2"] == 1 and m["cfg"] == {"x": 1}


def test_remote_storage_gives_a_local_scratch_directory() -> None:
    (r,) = Tuner(f, run_config=RunConfig(storage="memory://ctx-test", name="e3", verbose=0, system="simple")).fit()
    assert r.metrics["isdir"] and not r.metrics["dir"].startswith("memory://")
    assert r.metrics["dir"].endswith(os.path.join("e3", os.path.basename(r.path)))


def test_outside_a_trial(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    t = T({"x": 2})
    assert (t.trial_id, t.trial_name, t.training_iteration, t.get_config()) == ("default", "default", 0, {"x": 2})
    # recorded from Ray 2.60 (Trainable built by hand, no ray.init): logdir is a new directory under
    # ~/ray_results named <date><random>; audition's is under ~/audition_results (tests/test_trainable_direct.py)
    assert os.path.isdir(t.logdir) and os.path.dirname(t.logdir) == str(tmp_path / "audition_results")
    with pytest.raises(TuneError, match="outside a trial"):
        tune.get_context().get_trial_id()


# ---------------------------------------------------------------- the trial's resources
# Recorded from Ray 2.60 (ray.init(num_cpus=4); one Tuner per case, each in a fresh driver process:
# tune.get_context().get_trial_resources() in a function trainable, self.trial_resources in a class's
# setup(); both a PlacementGroupFactory with strategy "PACK" and head_bundle_is_empty False):
RAY_RESOURCES = {
    "default": ([{"CPU": 1.0}], {"CPU": 1.0}, 1.0),
    "cpu2": ([{"CPU": 2.0}], {"CPU": 2.0}, 2.0),  # with_resources(t, {"cpu": 2}), also {"CPU": 2}
    "gpu0": ([{"CPU": 1.0}], {"CPU": 1.0}, 1.0),  # {"cpu": 1, "gpu": 0}: a zero amount is dropped
    "cpu05": ([{"CPU": 0.5}], {"CPU": 0.5}, 0.5),
}
ASKED: dict[str, Any] = {"default": None, "cpu2": {"cpu": 2}, "gpu0": {"cpu": 1, "gpu": 0}, "cpu05": {"cpu": 0.5}}


def _seen(r: Any) -> tuple[Any, ...]:
    return (type(r).__name__, r.bundles, r.required_resources, r.head_cpus, r.strategy, r.head_bundle_is_empty)


def uses_resources(config: dict[str, Any]) -> None:
    tune.report({"seen": _seen(tune.get_context().get_trial_resources())})


class UsesResources(Trainable):
    def setup(self, config: dict[str, Any]) -> None:
        self.seen = _seen(self.trial_resources)

    def step(self) -> dict[str, Any]:
        return {"seen": self.seen, "done": True}


@pytest.mark.parametrize("case", sorted(RAY_RESOURCES))
@pytest.mark.parametrize("trainable", [uses_resources, UsesResources])
def test_trial_resources_are_rays_placement_group_factory(case: str, trainable: Any, tmp_path: Any) -> None:
    t = trainable if ASKED[case] is None else tune.with_resources(trainable, ASKED[case])
    (r,) = Tuner(t, run_config=RunConfig(storage=str(tmp_path), name="res", verbose=0, system="simple")).fit()
    bundles, required, head = RAY_RESOURCES[case]
    assert r.metrics["seen"] == ("PlacementGroupFactory", bundles, required, head, "PACK", False)


def test_trial_resources_reach_an_actor_process(tmp_path: Any, no_leaks: Any) -> None:
    (r,) = Tuner(tune.with_resources(uses_resources, {"CPU": 2}),
                 run_config=RunConfig(storage=str(tmp_path), name="res", verbose=0, system="multiproc")).fit()
    assert r.metrics["seen"][1:4] == RAY_RESOURCES["cpu2"]


def test_placement_group_factory_of_one_bundle() -> None:
    # recorded from Ray 2.60: PlacementGroupFactory([{"CPU": 2, "GPU": 1}, {"CPU": 1}]) has required_resources
    # {"CPU": 3.0, "GPU": 1.0}, head_cpus 2.0, and equals one built from its own bundles
    pgf = tune.PlacementGroupFactory([{"CPU": 2, "GPU": 1}, {"CPU": 1}])
    assert (pgf.required_resources, pgf.head_cpus, pgf.bundles) == (
        {"CPU": 3.0, "GPU": 1.0}, 2.0, [{"CPU": 2.0, "GPU": 1.0}, {"CPU": 1.0}])
    assert pgf == tune.PlacementGroupFactory(pgf.bundles)
    # audition places one dict per trial: one bundle converts, several are refused
    assert tune.with_resources(f, tune.PlacementGroupFactory([{"CPU": 2}]))._audition_resources == {"cpu": 2.0}
    with pytest.raises(ConfigError, match="placement groups"):
        tune.with_resources(f, pgf)


def test_trial_resources_outside_a_trial(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))  # (T's setup reads logdir: a new directory under ~, not the user's)
    assert T({"x": 2}).trial_resources is None  # Ray's Trainable built directly says None too
    with pytest.raises(TuneError, match="outside a trial"):  # Ray warns and returns None (see the docs)
        tune.get_context().get_trial_resources()
