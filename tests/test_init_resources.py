"""``actors.init(num_cpus=..., resources=...)`` declares this machine's resources as ``ray.init`` does
(``actors/_driver/local_resources.py``), and ``audition migrate`` keeps the call.

Recorded from Ray 2.60 (``benchmarks/ray_oracle/record_init_resources.py``): ``num_cpus=1`` runs one
trial at a time on any machine, ``num_cpus=4`` runs four on this two-core one, a two-CPU trial of four
runs two, and a declared custom resource limits the trials that ask for it; a second ``init`` and an
unknown keyword raise as Ray's. Before, ``migrate`` removed the call and every run offered the machine's
cores: the number of trials at once changed without a word.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings

import pytest

import actors
from actors import RunConfig, TuneConfig, Tuner, with_resources
from actors._driver.errors import ConfigError
from actors._driver.local_resources import local_slots, machine_cpus, machine_resources

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "data", "ray_init_resources.json")


@pytest.fixture(autouse=True)
def _undeclared():
    actors.shutdown()
    yield
    actors.shutdown()


@pytest.mark.slow
def test_runs_follow_the_declared_resources_as_rays_do(tmp_path):
    with open(DATA) as f:
        ray = json.load(f)
    run = subprocess.run([sys.executable, os.path.join(HERE, "_init_driver.py"), str(tmp_path)],
                         capture_output=True, text=True, timeout=240)
    assert run.returncode == 0, run.stderr[-3000:]
    got = json.loads(run.stdout.strip().splitlines()[-1])
    assert got["runs"] == ray["runs"]
    for key in ("init_twice", "init_twice_ignored", "unknown_keyword"):
        assert got[key] == ray[key], key
    # a documented difference: Ray 2.60 raises AssertionError there
    assert ray["cpu_in_resources"][0] == "AssertionError" and "Use `num_cpus` instead" in ray["cpu_in_resources"][1]
    assert got["cpu_in_resources"][0] == "ConfigError" and "use num_cpus" in got["cpu_in_resources"][1]


def test_init_declares_and_shutdown_forgets():
    assert not actors.is_initialized() and machine_resources() == {"cpu": float(machine_cpus())}
    actors.init(num_cpus=3, resources={"slot": 2})
    assert actors.is_initialized() and machine_resources() == {"cpu": 3.0, "slot": 2.0}
    actors.shutdown()
    assert not actors.is_initialized() and machine_resources() == {"cpu": float(machine_cpus())}
    actors.init()  # as Ray's: the machine's cores
    assert machine_resources() == {"cpu": float(machine_cpus())}


def test_a_second_init_raises_unless_told_to_ignore_it():
    actors.init(num_cpus=2)
    with pytest.raises(RuntimeError, match=r"Maybe you called ray\.init twice"):
        actors.init(num_cpus=5)
    actors.init(num_cpus=5, ignore_reinit_error=True)
    assert machine_resources() == {"cpu": 2.0}  # (Ray's second call changes nothing either)


@pytest.mark.parametrize(("kwargs", "error", "match"), [
    ({"num_cpu": 2}, RuntimeError, "Unknown keyword argument"),
    ({"num_cpus": 0}, ConfigError, "no trial could ever start"),
    ({"num_cpus": -1}, ConfigError, "finite number >= 0"),
    ({"num_cpus": True}, ConfigError, "finite number >= 0"),
    ({"resources": {"CPU": 2}}, ConfigError, "use num_cpus"),
    ({"resources": {"gpu": 1}}, ConfigError, "cannot be a custom resource"),
    ({"resources": {"slot": float("nan")}}, ConfigError, "finite number"),
])
def test_bad_arguments_are_refused_and_declare_nothing(kwargs, error, match):
    with pytest.raises(error, match=match):
        actors.init(**kwargs)
    assert not actors.is_initialized()


def test_arguments_with_an_effect_elsewhere_warn_naming_it_and_rays_own_services_are_accepted():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        actors.init(include_dashboard=False, configure_logging=False, logging_level="warning", namespace="n",
                    object_store_memory=10**8, address="auto", _temp_dir="/tmp/x")
    actors.shutdown()
    with pytest.warns(UserWarning) as caught:
        actors.init(num_cpus=2, log_to_driver=False, local_mode=True, runtime_env={"env_vars": {"A": "1"}},
                    address="ray://head:10001", num_gpus=1)
    text = str(caught[0].message)
    for advice in ("RunConfig(log_to_driver=...)", "RunConfig(system='simple')", "set environment variables",
                   "RunConfig(system='tcp://HOST:PORT')", "offers no GPUs"):
        assert advice in text
    assert machine_resources() == {"cpu": 2.0}


def test_slots_are_what_the_declared_resources_hold():
    actors.init(num_cpus=4, resources={"slot": 1})
    assert local_slots({"cpu": 1}) == 4
    assert local_slots({"cpu": 2}) == 2
    assert local_slots({"cpu": 0.5}, cap=3) == 3
    assert local_slots({"cpu": 1, "slot": 1}) == 1
    assert local_slots({"slot": 0.5}) == 2  # (one CPU each when unnamed)
    with pytest.raises(ConfigError, match=r"asks for 5 of 'cpu' but init\(num_cpus=...\) declared 4"):
        local_slots({"cpu": 5})
    with pytest.raises(ConfigError, match=r"init\(resources=\{'disk': N\}\)"):
        local_slots({"cpu": 1, "disk": 1})
    with pytest.raises(ConfigError, match="offers only") as info:
        local_slots({"cpu": 1, "gpu": 1})
    assert "init(resources=" not in str(info.value)  # GPUs are never declared that way


def test_without_init_a_trial_larger_than_the_machine_is_refused_as_before():
    with pytest.raises(ConfigError, match="CPUs but this machine has"):
        local_slots({"cpu": machine_cpus() + 1})


def test_a_tuner_takes_the_resources_declared_before_its_fit(tmp_path):
    def train(config):
        pass

    tuner = Tuner(train, tune_config=TuneConfig(num_samples=2), run_config=RunConfig(storage_path=str(tmp_path)))
    actors.init(num_cpus=1)  # after the Tuner was built: the run still takes it, as Ray's
    assert tuner._spec().max_concurrent == 1
    assert tuner._spec().total_resources == {"cpu": 1.0}
    actors.shutdown()
    assert tuner._spec().max_concurrent == machine_cpus()


def test_a_trial_asking_for_an_undeclared_resource_is_refused_when_the_tuner_is_built(tmp_path):
    def train(config):
        pass

    with pytest.raises(ConfigError, match="slot"):
        Tuner(with_resources(train, {"cpu": 1, "slot": 1}), run_config=RunConfig(storage_path=str(tmp_path)))
    actors.init(resources={"slot": 1})
    Tuner(with_resources(train, {"cpu": 1, "slot": 1}), run_config=RunConfig(storage_path=str(tmp_path)))


def test_a_restored_run_takes_the_resources_declared_when_it_runs(tmp_path):
    from actors import report

    def train(config):
        report({"x": 1})

    Tuner(train, tune_config=TuneConfig(num_samples=1),
          run_config=RunConfig(storage_path=str(tmp_path), name="r", system="simple", verbose=0)).fit()
    actors.init(num_cpus=1)
    restored = Tuner.restore(str(tmp_path / "r"), train)
    assert restored._spec().max_concurrent == 1 and restored._spec().total_resources == {"cpu": 1.0}
    actors.shutdown()
    actors.init(num_cpus=machine_cpus() + 3)
    assert restored._spec().max_concurrent == machine_cpus() + 3
