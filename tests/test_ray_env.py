"""Ray Tune's environment variables (``actors/_driver/ray_env.py``): the ones audition reads work as in
Ray, a run warns once about the set ones it does not read, and ``TUNE_RESULT_DIR`` raises as Ray 2.60's
``tune.run`` does. Ray's own list (``ray.tune.constants.TUNE_ENV_VARS``, copied from Ray 2.60 below) is
covered: each is read, warned about, refused, or only tunes Ray's machinery."""

from __future__ import annotations

import os
import warnings

import pytest

from actors import RunConfig, Tuner, report
from actors._driver import ray_env
from actors._driver.errors import ConfigError
from actors._driver.ray_env import DEPRECATED, NOT_READ, READ, check_ray_environment, dated_subdir_disabled

# ray.tune.constants.TUNE_ENV_VARS in Ray 2.60
RAY_TUNE_ENV_VARS = {
    "RAY_AIR_LOCAL_CACHE_DIR", "TUNE_DISABLE_AUTO_CALLBACK_LOGGERS", "TUNE_DISABLE_AUTO_INIT",
    "TUNE_DISABLE_DATED_SUBDIR", "TUNE_DISABLE_STRICT_METRIC_CHECKING", "TUNE_DISABLE_SIGINT_HANDLER",
    "TUNE_FORCE_TRIAL_CLEANUP_S", "TUNE_FUNCTION_THREAD_TIMEOUT_S", "TUNE_GLOBAL_CHECKPOINT_S",
    "TUNE_MAX_LEN_IDENTIFIER", "TUNE_MAX_PENDING_TRIALS_PG", "TUNE_PLACEMENT_GROUP_PREFIX",
    "TUNE_PLACEMENT_GROUP_RECON_INTERVAL", "TUNE_PRINT_ALL_TRIAL_ERRORS", "TUNE_RESULT_DIR",
    "TUNE_RESULT_BUFFER_LENGTH", "TUNE_RESULT_DELIM", "TUNE_RESULT_BUFFER_MAX_TIME_S",
    "TUNE_RESULT_BUFFER_MIN_TIME_S", "TUNE_WARN_THRESHOLD_S", "TUNE_WARN_INSUFFICENT_RESOURCE_THRESHOLD_S",
    "TUNE_WARN_INSUFFICENT_RESOURCE_THRESHOLD_S_AUTOSCALER",
    "TUNE_WARN_EXCESSIVE_EXPERIMENT_CHECKPOINT_SYNC_THRESHOLD_S", "TUNE_STATE_REFRESH_PERIOD",
    "TUNE_RESTORE_RETRY_NUM", "RAY_TUNE_CALLBACKS",
}
# only Ray's own machinery: nothing in audition to act on, so nothing said
RAYS_MACHINERY = {
    "TUNE_DISABLE_AUTO_INIT", "TUNE_FUNCTION_THREAD_TIMEOUT_S", "TUNE_PLACEMENT_GROUP_PREFIX",
    "TUNE_PLACEMENT_GROUP_RECON_INTERVAL", "TUNE_WARN_INSUFFICENT_RESOURCE_THRESHOLD_S",
    "TUNE_WARN_INSUFFICENT_RESOURCE_THRESHOLD_S_AUTOSCALER",
    "TUNE_WARN_EXCESSIVE_EXPERIMENT_CHECKPOINT_SYNC_THRESHOLD_S", "TUNE_STATE_REFRESH_PERIOD",
    "TUNE_RESTORE_RETRY_NUM",
}


@pytest.fixture(autouse=True)
def _fresh_warnings(monkeypatch):
    monkeypatch.setattr(ray_env, "_warned", set())


def test_every_one_of_rays_variables_is_read_warned_about_refused_or_rays_own():
    handled = set(READ) | set(NOT_READ) | set(DEPRECATED) | RAYS_MACHINERY
    assert RAY_TUNE_ENV_VARS <= handled | {"RAY_CHDIR_TO_TRIAL_DIR"}
    assert not (set(READ) & set(NOT_READ)) and not (set(NOT_READ) & RAYS_MACHINERY)


def test_a_set_variable_audition_does_not_read_warns_once_naming_what_to_use():
    env = {"TUNE_RESULT_DELIM": "_", "TUNE_FORCE_TRIAL_CLEANUP_S": "5", "TUNE_STATE_REFRESH_PERIOD": "1",
           "TUNE_MAX_LEN_IDENTIFIER": "50"}
    with pytest.warns(UserWarning) as caught:
        check_ray_environment(env)
    assert len(caught) == 1
    text = str(caught[0].message)
    assert "TUNE_RESULT_DELIM" in text and "'/'" in text
    assert "TUNE_FORCE_TRIAL_CLEANUP_S" in text and "trial_stop_grace_s" in text
    assert "TUNE_STATE_REFRESH_PERIOD" not in text and "TUNE_MAX_LEN_IDENTIFIER" not in text
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_ray_environment(env)  # once per process
        check_ray_environment({})


@pytest.mark.parametrize("name", DEPRECATED)
def test_rays_deprecated_result_dirs_raise_as_rays_run_does(name):
    with pytest.raises(DeprecationWarning, match=f"`{name}` is deprecated.*storage_path"):
        check_ray_environment({name: "/somewhere"})
    check_ray_environment({name: ""})  # (Ray: only a non-empty value)


def test_a_run_with_tune_result_dir_set_raises_before_anything_is_written(tmp_path, monkeypatch):
    monkeypatch.setenv("TUNE_RESULT_DIR", str(tmp_path / "old"))
    tuner = Tuner(lambda config: report({"x": 1}),
                  run_config=RunConfig(storage_path=str(tmp_path / "s"), system="simple", verbose=0))
    with pytest.raises(DeprecationWarning):
        tuner.fit()
    assert not os.path.exists(tmp_path / "s") or not os.listdir(tmp_path / "s")


@pytest.mark.parametrize(("value", "disabled"), [("1", True), ("0", False), ("", None), ("yes", None)])
def test_dated_subdir_is_read_as_ray_reads_it(value, disabled):
    if disabled is None:
        with pytest.raises(ConfigError, match="TUNE_DISABLE_DATED_SUBDIR"):
            dated_subdir_disabled({"TUNE_DISABLE_DATED_SUBDIR": value})
    else:
        assert dated_subdir_disabled({"TUNE_DISABLE_DATED_SUBDIR": value}) is disabled
    assert dated_subdir_disabled({}) is False


def test_an_unnamed_experiment_is_named_after_its_trainable_alone_with_dated_subdirs_disabled(tmp_path,
                                                                                              monkeypatch):
    def train(config):
        report({"x": 1})

    assert Tuner(train, run_config=RunConfig(storage_path=str(tmp_path))).name.startswith("train_20")
    monkeypatch.setenv("TUNE_DISABLE_DATED_SUBDIR", "1")
    assert Tuner(train, run_config=RunConfig(storage_path=str(tmp_path))).name == "train"
    assert Tuner(train, run_config=RunConfig(storage_path=str(tmp_path), name="mine")).name == "mine"
