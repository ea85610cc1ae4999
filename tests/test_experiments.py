"""Ray Tune's classic ``Experiment`` and ``run_experiments`` (``actors.Experiment``, ``actors.run_experiments``).

The expectations were recorded from Ray 2.60 running the same calls (``f`` below, ``verbose=0``): per
trial its config, status, last ``training_iteration`` and ``v``, its experiment directory and its
``experiment_tag``.
"""

from __future__ import annotations

import os
from typing import Any

import pytest

import actors as tune
from actors import Experiment, TuneError
from actors._driver.errors import ConfigError
from actors.stoppers import CombinedStopper, MaximumIterationStopper, TimeoutStopper


def f(config: dict[str, Any]) -> None:
    for i in range(3):
        tune.report({"v": config.get("x", 0) * 10 + i, "keys": sorted(config)})


def _desc(trials: list[Any], root: str) -> list[tuple[Any, ...]]:
    return [(t.config, str(t.status), t.last_result.get("training_iteration"), t.last_result.get("v"),
             os.path.relpath(t.path, root).split(os.sep)[0], t.experiment_tag) for t in trials]


def test_run_experiments_takes_rays_dict_form(storage_dir: str) -> None:
    trials = tune.run_experiments({"e1": {"run": f, "config": {"x": tune.grid_search([1, 2])},
                                          "stop": {"training_iteration": 2}, "storage_path": storage_dir}},
                                  verbose=0, system="simple")
    assert isinstance(trials, list)
    assert _desc(trials, storage_dir) == [({"x": 1}, "TERMINATED", 2, 11, "e1", "0_x=1"),
                                          ({"x": 2}, "TERMINATED", 2, 21, "e1", "1_x=2")]


def test_run_of_an_experiment_takes_its_settings_not_runs(storage_dir: str) -> None:
    # Ray: run()'s config and num_samples are ignored for an Experiment (2 trials of x=3, not 5 with "ignored")
    exp = Experiment("e2", f, config={"x": 3}, num_samples=2, stop={"training_iteration": 1}, storage_path=storage_dir)
    analysis = tune.run(exp, config={"ignored": 1}, num_samples=5, verbose=0, system="simple")
    assert _desc(analysis.trials, storage_dir) == [({"x": 3}, "TERMINATED", 1, 30, "e2", "0"),
                                                   ({"x": 3}, "TERMINATED", 1, 30, "e2", "1")]
    assert analysis.experiment_path == os.path.join(storage_dir, "e2")
    again = tune.run([Experiment("e3", f, config={"x": 1}, storage_path=storage_dir)], verbose=0, system="simple")
    assert [t.last_result["training_iteration"] for t in again.trials] == [3]  # a list of one: the same


def test_several_experiments_run_one_after_the_other(storage_dir: str) -> None:
    trials = tune.run_experiments([Experiment("a", f, config={"x": 4}, storage_path=storage_dir),
                                   Experiment("b", f, config={"x": 5}, storage_path=storage_dir)],
                                  concurrent=False, verbose=0, system="simple")
    assert _desc(trials, storage_dir) == [({"x": 4}, "TERMINATED", 3, 42, "a", "0"),
                                          ({"x": 5}, "TERMINATED", 3, 52, "b", "0")]


def test_several_experiments_together_are_refused_naming_the_fix(storage_dir: str) -> None:
    # Ray runs them in one run, sharing the scheduler and search algorithm (recorded: tags "0" and "1",
    # the experiment state only in the first one's directory); audition refuses before anything runs
    exps = [Experiment("c", f, config={"x": 6}, storage_path=storage_dir),
            Experiment("d", f, config={"x": 7}, storage_path=storage_dir)]
    with pytest.raises(ConfigError, match=r"concurrent=True\) with 2 experiments.*Pass concurrent=False"):
        tune.run_experiments(exps, verbose=0, system="simple")
    with pytest.raises(ConfigError, match=r"run\(run_or_experiment=\.\.\.\).*run_experiments\(experiments, "
                                          r"concurrent=False\)"):
        tune.run(exps, verbose=0, system="simple")
    with pytest.raises(ConfigError, match="give an Experiment, a list of them, or a dict"):
        tune.run_experiments([f], system="simple")
    assert not os.path.exists(storage_dir)


def test_an_experiment_spec_as_rays() -> None:
    e = Experiment("n", f, config={"x": 1}, stop={"training_iteration": 1})
    assert sorted(e.spec) == ["checkpoint_config", "config", "export_formats", "log_to_file", "max_failures",
                              "num_samples", "resources_per_trial", "restore", "run", "stop", "time_budget_s",
                              "trial_dirname_creator", "trial_name_creator"]  # Ray's, less its "storage"
    assert (e.spec["num_samples"], e.spec["stop"], e.stopper, e.run_identifier) == (1, {"training_iteration": 1},
                                                                                    None, "f")
    assert e.public_spec == {"stop": {"training_iteration": 1}, "time_budget_s": None, "num_samples": 1}
    both = Experiment("s", f, stop=[MaximumIterationStopper(2)], time_budget_s=5)
    assert isinstance(both.stopper, CombinedStopper) and both.spec["stop"] == {}
    assert isinstance(Experiment("t", f, time_budget_s=5).stopper, TimeoutStopper)
    assert Experiment.from_json("rl", {"run": f, "env": "CartPole"}).run_kwargs()["config"] == {"env": "CartPole"}
    assert Experiment("c", f, checkpoint_config={"num_to_keep": 2}).checkpoint_config.num_to_keep == 2
    from actors.experiment import Experiment as FromRayPath  # ray.tune.experiment.Experiment

    assert FromRayPath is Experiment


def test_bad_experiments_are_refused_as_ray_refuses_them() -> None:
    with pytest.raises(TuneError, match=r"specification 'bad' \(\['bogus'\]\).*unexpected keyword argument 'bogus'"):
        Experiment.from_json("bad", {"run": f, "bogus": 1})
    with pytest.raises(TuneError, match="No trainable specified!"):
        Experiment.from_json("bad", {"config": {}})
    with pytest.raises(ConfigError, match=r"Experiment\(config\) must be a dict, got list"):
        Experiment("x", f, config=[1])
    with pytest.raises(ConfigError, match=r"Experiment\(stop=\.\.\.\) is invalid: a list given as stop must hold "
                                          r"Stopper instances only"):
        Experiment("x", f, stop=[{"training_iteration": 1}])
    for arg in ("storage_filesystem", "export_formats", "restore", "local_dir"):
        with pytest.raises(ConfigError, match=rf"Experiment\({arg}=\.\.\.\) is not supported"):
            Experiment("x", f, **{arg: ["x"]})


def test_a_list_of_stoppers_stops_when_any_does(storage_dir: str) -> None:
    # Ray's Experiment (so RunConfig and run too) combines a list of Stoppers
    analysis = tune.run(f, stop=[MaximumIterationStopper(5), MaximumIterationStopper(2)], verbose=0,
                        system="simple", storage_path=storage_dir)
    assert [t.last_result["training_iteration"] for t in analysis.trials] == [2]
