"""``actors.run`` and ``actors.ExperimentAnalysis``: Ray Tune's classic ``tune.run(...)`` API.

Expected values are recorded from Ray 2.60 (``/work/rayvenv``, ``ray.init(num_cpus=2)``): the same
trainables run with ``ray.tune.run(...)`` and the same arguments, and what the returned
``ExperimentAnalysis`` gave was printed and copied here. Ray is never imported.
"""

from __future__ import annotations

import os
import warnings
from typing import Any

import pytest

import actors as tune
from actors import CheckpointConfig, ExperimentAnalysis, TuneError
from actors._driver.errors import ConfigError

# each trial's loss series: best by "last" (min) is x=2, by "all" x=1, by "avg" x=3
SERIES = {1: [5.0, 1.0, 9.0], 2: [4.0, 4.0, 4.0], 3: [2.0, 3.0, 5.0]}


def series(config: dict[str, Any]) -> None:
    for v in SERIES[config["x"]]:
        tune.report({"loss": v, "nested": {"a": v * 2}})


def flaky(config: dict[str, Any]) -> None:
    for i in range(3):
        tune.report({"loss": config["x"] * 10 + i})
        if config["x"] == 2 and i == 1 and not os.path.exists(config.get("fixed", "")):
            raise ValueError("boom")


def curve(config: dict[str, Any]) -> None:
    for i in range(1, 9):
        tune.report({"acc": config["q"] * i})


class Scored(tune.Trainable):
    """Its score per iteration is 3, 9, 1, 7, 5, 2 (times k); it saves its iteration."""

    def setup(self, config: dict[str, Any]) -> None:
        self.i = 0

    def step(self) -> dict[str, Any]:
        self.i += 1
        return {"score": [3, 9, 1, 7, 5, 2][self.i - 1] * self.config["k"], "loss": 10 - self.i}

    def save_checkpoint(self, checkpoint_dir: str) -> None:
        with open(os.path.join(checkpoint_dir, "i"), "w") as f:
            f.write(str(self.i))

    def load_checkpoint(self, checkpoint_dir: str) -> None:
        with open(os.path.join(checkpoint_dir, "i")) as f:
            self.i = int(f.read())


def saved_at(ckpt: Any) -> int | None:
    if ckpt is None:
        return None
    with ckpt.as_directory() as d, open(os.path.join(d, "i")) as f:
        return int(f.read())


def simple(**kw: Any) -> Any:
    return tune.run(verbose=0, system="simple", **kw)


def test_a_grid_search_gives_rays_analysis(storage_dir: str) -> None:
    # recorded from Ray 2.60: tune.run(series, config={"x": grid_search([1, 2, 3]), "c": 7}, metric="loss",
    # mode="min"), each attribute printed
    a = simple(run_or_experiment=series, config={"x": tune.grid_search([1, 2, 3]), "c": 7}, metric="loss",
               mode="min", storage_path=storage_dir, name="grid")
    assert isinstance(a, ExperimentAnalysis)
    assert (a.default_metric, a.default_mode) == ("loss", "min")
    assert a.experiment_path == os.path.join(storage_dir, "grid")
    assert [(str(t.status), t.config) for t in a.trials] == [
        ("TERMINATED", {"x": 1, "c": 7}), ("TERMINATED", {"x": 2, "c": 7}), ("TERMINATED", {"x": 3, "c": 7})]
    ids = [t.trial_id for t in a.trials]
    assert a.best_config == {"x": 2, "c": 7}
    assert a.best_trial is a.trials[1] and str(a.best_trial) == f"series_{ids[1]}"
    assert a.best_result["loss"] == 4.0 and a.best_result["config"] == {"x": 2, "c": 7}
    assert {"loss", "nested", "training_iteration", "trial_id", "config", "done"} <= set(a.best_result)
    assert list(a.results) == ids
    df = a.results_df
    assert df.index.name == "trial_id" and list(df.index) == ids
    assert {"loss", "nested/a", "config/x", "config/c", "training_iteration"} <= set(df.columns)
    assert "trial_id" not in df.columns and "config" not in df.columns
    assert a.best_result_df.index.name == "trial_id" and a.best_result_df["loss"].tolist() == [4.0]
    assert a.best_dataframe["loss"].tolist() == [4.0, 4.0, 4.0]
    d = a.dataframe()
    assert d["loss"].tolist() == [9.0, 4.0, 5.0]
    assert d["logdir"].tolist() == ids  # Ray 2.60 fills logdir with the trial id
    assert {"trial_id", "nested/a", "config/x", "config/c", "logdir"} <= set(d.columns)
    assert a.dataframe(metric="loss", mode="min")["loss"].tolist() == [1.0, 4.0, 2.0]
    assert a.dataframe(metric="loss", mode="max")["loss"].tolist() == [9.0, 4.0, 5.0]
    assert a.dataframe(metric="nested/a", mode="max")["nested/a"].tolist() == [18.0, 8.0, 10.0]
    assert list(a.trial_dataframes) == ids
    assert [f["loss"].tolist() for f in a.trial_dataframes.values()] == [SERIES[1], SERIES[2], SERIES[3]]
    assert a.get_all_configs() == {ids[0]: {"x": 1, "c": 7}, ids[1]: {"x": 2, "c": 7}, ids[2]: {"x": 3, "c": 7}}
    assert a.get_all_configs(prefix=True)[ids[0]] == {"config/x": 1, "config/c": 7}
    best = {(mode, scope): a.get_best_trial("loss", mode, scope).config["x"]
            for mode in ("min", "max") for scope in ("last", "all", "avg", "last-5-avg", "last-10-avg")}
    assert best == {("min", "last"): 2, ("min", "all"): 1, ("min", "avg"): 3, ("min", "last-5-avg"): 3,
                    ("min", "last-10-avg"): 3, ("max", "last"): 1, ("max", "all"): 1, ("max", "avg"): 1,
                    ("max", "last-5-avg"): 1, ("max", "last-10-avg"): 1}
    assert a.get_best_config("loss", "min", "all") == {"x": 1, "c": 7}
    assert a.get_best_trial("nested/a", "max").config == {"x": 1, "c": 7}
    assert a.get_best_trial("nope", "max") is None and a.get_best_config("nope", "max") is None
    assert a.trials[0].metric_analysis["loss"] == {"max": 9.0, "min": 1.0, "avg": 5.0, "last": 9.0,
                                                   "last-5-avg": 5.0, "last-10-avg": 5.0}
    # no checkpoints: None (Ray logs an error)
    assert a.best_checkpoint is None and a.get_last_checkpoint() is None and a.trials[0].checkpoint is None
    for bad in (lambda: a.get_best_trial("loss", "up"), lambda: a.get_best_trial("loss", "min", "first"),
                lambda: a.dataframe(mode="min")):
        with pytest.raises(ValueError):  # Ray: ValueError
            bad()
    again = ExperimentAnalysis(a.experiment_path)  # read back from storage: the same answers
    assert again.best_config == {"x": 2, "c": 7} and [str(t) for t in again.trials] == [str(t) for t in a.trials]


def test_without_metric_and_mode_the_best_properties_name_the_fix(storage_dir: str) -> None:
    # recorded from Ray 2.60: tune.run(series, config={"x": grid_search([1, 2])}) without metric/mode:
    # each best_* property raises ValueError ("pass a `metric` and `mode` parameter to `tune.run()`")
    b = simple(run_or_experiment=series, config={"x": tune.grid_search([1, 2])}, storage_path=storage_dir,
               name="nometric")
    assert (b.default_metric, b.default_mode) == (None, None)
    for attr in ("best_config", "best_trial", "best_result", "best_checkpoint", "best_dataframe", "best_result_df"):
        with pytest.raises(ValueError, match=r"pass a `metric` and `mode` to run\(") as info:
            getattr(b, attr)
        assert attr.replace("_df", "") in str(info.value) or attr == "best_result_df"
    with pytest.raises(ValueError, match="metric"):
        b.get_best_trial()
    with pytest.raises(ValueError, match="mode"):
        b.get_best_trial("loss")
    with pytest.raises(ValueError, match="mode"):
        b.get_best_checkpoint(b.trials[0])
    assert b.get_best_trial("loss", "min").config == {"x": 2}
    # recorded: with one trial, get_best_trial returns it whatever the metric; best_config still raises
    c = simple(run_or_experiment=series, config={"x": 2}, storage_path=storage_dir, name="single")
    assert c.get_best_trial("nope", "max").config == {"x": 2}
    with pytest.raises(ValueError):
        _ = c.best_config
    # recorded: a mode without a metric runs, and the analysis compares Ray's unnamed "_metric"
    d = simple(run_or_experiment=series, config={"x": 2}, mode="min", storage_path=storage_dir, name="modeonly")
    assert (d.default_metric, d.default_mode) == ("_metric", "min")
    with pytest.raises(ValueError, match="mode"):  # recorded: ValueError naming mode
        simple(run_or_experiment=series, config={"x": 2}, mode="up", storage_path=storage_dir, name="badmode")


def test_a_failed_trial_raises_tune_error_unless_told_not_to(storage_dir: str) -> None:
    grid = {"x": tune.grid_search([1, 2, 3])}
    # recorded from Ray 2.60: TuneError('Trials did not complete', [flaky_..._00001])
    with pytest.raises(TuneError) as info:
        simple(run_or_experiment=flaky, config=grid, metric="loss", mode="min", storage_path=storage_dir, name="f")
    message, trials = info.value.args
    assert message == "Trials did not complete" and [t.config["x"] for t in trials] == [2]
    assert str(info.value) == f"('Trials did not complete', [{trials[0]}])"
    # recorded: raise_on_failed_trial=False returns; ERROR trial keeps what it reported; best (max) x=3
    a = simple(run_or_experiment=flaky, config=grid, metric="loss", mode="max", storage_path=storage_dir,
               name="f2", raise_on_failed_trial=False)
    assert [(t.config["x"], str(t.status), t.last_result["loss"], t.num_failures) for t in a.trials] == [
        (1, "TERMINATED", 12, 0), (2, "ERROR", 21, 1), (3, "TERMINATED", 32, 0)]
    assert a.best_config == {"x": 3}
    assert a.dataframe()["loss"].tolist() == [12, 21, 32] and len(a.results_df) == 3
    assert isinstance(a.trials[1].error, ValueError)
    # recorded: fail_fast=True with the failing trial first raises TuneError too
    with pytest.raises(TuneError, match="Trials did not complete"):
        simple(run_or_experiment=flaky, config={"x": tune.grid_search([2, 1])}, storage_path=storage_dir,
               name="ff", fail_fast=True, max_concurrent_trials=1)
    with pytest.raises(ValueError, match="max_failures"):  # recorded: ValueError
        simple(run_or_experiment=flaky, config={"x": 2}, fail_fast=True, max_failures=1, storage_path=storage_dir)


def test_max_failures_retries_a_trial(storage_dir: str, tmp_path: Any) -> None:
    mark = str(tmp_path / "failed-once")

    def once(config: dict[str, Any]) -> None:
        for i in range(3):
            tune.report({"loss": float(i)})
            if i == 1 and not os.path.exists(mark):
                open(mark, "w").close()
                raise RuntimeError("first time")

    # recorded from Ray 2.60: TERMINATED, num_failures 1, last training_iteration 3 (its history differs:
    # Ray keeps the failed run's rows, see docs/coming-from-ray.md "One row per iteration")
    r = simple(run_or_experiment=once, max_failures=2, storage_path=storage_dir, name="retry")
    t = r.trials[0]
    assert (str(t.status), t.num_failures, t.last_result["training_iteration"]) == ("TERMINATED", 1, 3)


def test_class_trainable_checkpoint_arguments_as_ray(storage_dir: str) -> None:
    # recorded from Ray 2.60: tune.run(Scored, config={"k": grid_search([1, 2])}, stop={"training_iteration": 6},
    # checkpoint_freq=1, keep_checkpoints_num=2, checkpoint_score_attr="score", metric="score", mode="max")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        r = simple(run_or_experiment=Scored, config={"k": tune.grid_search([1, 2])},
                   stop={"training_iteration": 6}, checkpoint_freq=1, keep_checkpoints_num=2,
                   checkpoint_score_attr="score", metric="score", mode="max", storage_path=storage_dir, name="ck")
    deprecated = sorted(str(w.message).split("=")[0] for w in caught if w.category is DeprecationWarning
                        and str(w.message).startswith("run("))
    assert deprecated == ["run(checkpoint_freq", "run(checkpoint_score_attr", "run(keep_checkpoints_num"]
    assert r.best_config == {"k": 2}
    assert saved_at(r.best_checkpoint) == 2
    for t in r.trials:  # recorded, both trials alike
        assert saved_at(t.checkpoint) == 6
        assert [saved_at(c) for c, _ in t.result.best_checkpoints] == [4, 2]
        assert saved_at(r.get_best_checkpoint(t, "score", "max")) == 2
        assert saved_at(r.get_best_checkpoint(t, "score", "min")) == 4
        assert saved_at(r.get_best_checkpoint(t)) == 2  # run's metric and mode
        assert saved_at(r.get_best_checkpoint(t, "loss", "min")) == 4
        assert saved_at(r.get_last_checkpoint(t)) == 4
    assert saved_at(r.get_last_checkpoint()) == 4
    assert isinstance(r.best_checkpoint, tune.Checkpoint)
    # recorded: checkpoint_freq=2, checkpoint_at_end=True, "min-loss", keep 1: only the end checkpoint (5)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        r = simple(run_or_experiment=Scored, config={"k": 1}, stop={"training_iteration": 5}, checkpoint_freq=2,
                   checkpoint_at_end=True, checkpoint_score_attr="min-loss", keep_checkpoints_num=1,
                   storage_path=storage_dir, name="ck2")
    assert sum(w.category is DeprecationWarning for w in caught) >= 5  # four arguments and the min- prefix
    t = r.trials[0]
    assert saved_at(t.checkpoint) == 5 and [saved_at(c) for c, _ in t.result.best_checkpoints] == [5]
    # recorded: without checkpoint arguments tune.run takes no end checkpoint of a class (a Tuner does)
    r = simple(run_or_experiment=Scored, config={"k": 1}, stop={"training_iteration": 3}, storage_path=storage_dir,
               name="ck3")
    assert r.trials[0].checkpoint is None
    r = simple(run_or_experiment=Scored, config={"k": 1}, stop={"training_iteration": 3}, storage_path=storage_dir,
               name="ck4", checkpoint_config=CheckpointConfig())
    assert r.trials[0].checkpoint is None
    # recorded: Ray refuses checkpoint_freq / checkpoint_at_end for a function trainable (ValueError)
    for arg in ({"checkpoint_freq": 1}, {"checkpoint_at_end": True}):
        with pytest.raises(ValueError), warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            simple(run_or_experiment=curve, config={"q": 1}, storage_path=storage_dir, **arg)


def test_scheduler_stop_and_concurrency_pass_through(storage_dir: str) -> None:
    from actors.schedulers import ASHAScheduler

    # recorded from Ray 2.60: ASHA(grace_period=1, max_t=8, reduction_factor=2), one trial at a time
    r = simple(run_or_experiment=curve, config={"q": tune.grid_search([1, 4, 2, 3])}, metric="acc", mode="max",
               max_concurrent_trials=1, scheduler=ASHAScheduler(grace_period=1, max_t=8, reduction_factor=2),
               storage_path=storage_dir, name="asha")
    assert [(t.config["q"], t.last_result["training_iteration"], str(t.status)) for t in r.trials] == [
        (1, 8, "TERMINATED"), (4, 8, "TERMINATED"), (2, 1, "TERMINATED"), (3, 8, "TERMINATED")]
    # recorded: a scheduler with its own metric/mode and run(metric=, mode=) too: ValueError (audition
    # refuses only a different value, as its Tuner does: docs/coming-from-ray.md)
    with pytest.raises(ValueError):
        simple(run_or_experiment=curve, config={"q": 1}, metric="acc", mode="max",
               scheduler=ASHAScheduler(metric="other", mode="max"), storage_path=storage_dir)
    # recorded: stop={"training_iteration": 2} ends both at 2, TERMINATED; best (min loss) x=1
    e = simple(run_or_experiment=series, config={"x": tune.grid_search([1, 3])}, stop={"training_iteration": 2},
               metric="loss", mode="min", storage_path=storage_dir, name="stop")
    assert [(t.config["x"], t.last_result["training_iteration"], str(t.status)) for t in e.trials] == [
        (1, 2, "TERMINATED"), (3, 2, "TERMINATED")]
    assert e.best_config == {"x": 1}
    # recorded: a stop function of (trial_id, result) ends the trial at acc >= 3 (iteration 3)
    f = simple(run_or_experiment=curve, config={"q": 1}, stop=lambda tid, res: res["acc"] >= 3,
               resources_per_trial={"cpu": 1}, storage_path=storage_dir, name="stopfn")
    assert f.trials[0].last_result["training_iteration"] == 3
    # Ray's run takes a PlacementGroupFactory for resources_per_trial too (it failed with a TypeError here)
    from actors import PlacementGroupFactory

    p = simple(run_or_experiment=curve, config={"q": 1}, stop={"training_iteration": 1}, storage_path=storage_dir,
               resources_per_trial=PlacementGroupFactory([{"CPU": 1}]), name="pgf")
    assert str(p.trials[0].status) == "TERMINATED"
    with pytest.raises(ConfigError, match=r"RunConfig\(resources_per_trial=...\): resources must be a dict"):
        simple(run_or_experiment=curve, config={"q": 1}, resources_per_trial=lambda config: {"CPU": 1},
               storage_path=storage_dir, name="fn")
    # recorded: random search, num_samples=3 -> three trials with three configs
    g = simple(run_or_experiment=curve, config={"q": tune.uniform(0, 1)}, num_samples=3,
               stop={"training_iteration": 1}, storage_path=storage_dir, name="rand")
    assert len({t.config["q"] for t in g.trials}) == 3


@pytest.mark.parametrize(("kwargs", "named"), [
    ({"run_or_experiment": [curve, curve]}, "run_or_experiment"),
    ({"local_dir": "/tmp/x"}, "local_dir"),  # Ray 2.60 raises too
    ({"chdir_to_trial_dir": False}, "chdir_to_trial_dir"),  # Ray 2.60 raises too
    ({"storage_filesystem": object()}, "storage_filesystem"),
    ({"export_formats": ["model"]}, "export_formats"),
    ({"restore": "/some/checkpoint"}, "restore"),
    ({"resume_config": object()}, "resume_config"),
    ({"resume": "LOCAL"}, "resume"),  # Ray 2.60 raises too
    ({"resume": "AUTO+BOGUS"}, "resume"),  # Ray 2.60: ValueError
])
def test_what_audition_cannot_honour_is_refused_naming_the_argument(kwargs: dict[str, Any], named: str,
                                                                    storage_dir: str) -> None:
    kwargs = {"run_or_experiment": curve, "config": {"q": 1}, "storage_path": storage_dir, **kwargs}
    with pytest.raises(ConfigError, match=rf"run\({named}=\.\.\.\)"):
        simple(**kwargs)
    assert not os.path.exists(storage_dir)  # refused before anything ran


def test_resume_strings_map_onto_tuner_restore_as_rays_resume_config() -> None:
    from actors._driver.classic import _resume_choices

    # Ray 2.60 (tune.py, _build_resume_config_from_legacy_config, read): ResumeConfig's (unfinished,
    # errored) for each string; as (resume_unfinished, resume_errored, restart_errored)
    assert _resume_choices(None) is None and _resume_choices(False) is None
    assert _resume_choices(True) == _resume_choices("AUTO") == (True, False, False)
    assert _resume_choices("AUTO+ERRORED") == (True, True, False)
    assert _resume_choices("AUTO+RESTART_ERRORED") == (True, False, True)
    assert _resume_choices("AUTO+ERRORED_ONLY") == (False, True, False)
    assert _resume_choices("AUTO+RESTART_ERRORED_ONLY") == (False, False, True)
    assert _resume_choices("AUTO+ERRORED+RESTART_ERRORED") == (True, False, True)  # the last one wins


def test_resume_continues_a_named_experiment(storage_dir: str, tmp_path: Any) -> None:
    fixed = str(tmp_path / "fixed")
    grid = {"x": tune.grid_search([1, 2]), "fixed": fixed}
    first = simple(run_or_experiment=flaky, config=grid, storage_path=storage_dir, name="res",
                   raise_on_failed_trial=False)
    assert [str(t.status) for t in first.trials] == ["TERMINATED", "ERROR"]  # recorded
    # without resume= a new run starts (as Ray's), saved beside the first (Ray: into its directory)
    other = simple(run_or_experiment=flaky, config=grid, storage_path=storage_dir, name="res",
                   raise_on_failed_trial=False)
    assert other.experiment_path == first.experiment_path + "_2"
    open(fixed, "w").close()
    # recorded from Ray 2.60: resume="AUTO" leaves the errored trial as it was (ERROR at iteration 2)
    again = simple(run_or_experiment=flaky, config=grid, storage_path=storage_dir, name="res", resume="AUTO",
                   raise_on_failed_trial=False)
    assert sorted((t.config["x"], str(t.status), t.last_result["training_iteration"]) for t in again.trials) == [
        (1, "TERMINATED", 3), (2, "ERROR", 2)]
    # recorded: "AUTO+RESTART_ERRORED" runs it again from scratch: both TERMINATED at 3
    last = simple(run_or_experiment=flaky, config=grid, storage_path=storage_dir, name="res",
                  resume="AUTO+RESTART_ERRORED")
    assert sorted((str(t.status), t.last_result["training_iteration"]) for t in last.trials) == [
        ("TERMINATED", 3), ("TERMINATED", 3)]
    # recorded: resume=True where nothing was saved starts a new experiment
    new = simple(run_or_experiment=curve, config={"q": 1}, storage_path=storage_dir, name="absent", resume=True)
    assert [str(t.status) for t in new.trials] == ["TERMINATED"]


def sized(config: dict[str, Any]) -> None:
    """Reports the CPUs its trial was given; x=2 fails until ``config["fixed"]`` exists."""
    cpus = tune.get_context().get_trial_resources().required_resources["CPU"]
    if config["x"] == 2 and not os.path.exists(config["fixed"]):
        raise ValueError("boom")
    tune.report({"cpus": cpus})


@pytest.mark.parametrize("resume", ["AUTO+ERRORED", "AUTO+RESTART_ERRORED"])
def test_resume_gives_resources_per_trial_to_the_trials_it_runs_again(resume: str, storage_dir: str,
                                                                        tmp_path: Any) -> None:
    # recorded from Ray 2.60 (tune.run, then tune.run(resume="AUTO+ERRORED", resources_per_trial={"cpu": 2})):
    # the errored trial runs again on 2 CPUs ({'CPU': 2.0} from get_trial_resources), the finished ones keep
    # {'CPU': 1.0}: Ray's update_pending_trial_resources gives them to the trials its requeue made PENDING
    fixed = str(tmp_path / "fixed")
    grid = {"x": tune.grid_search([1, 2, 3]), "fixed": fixed}
    first = simple(run_or_experiment=sized, config=grid, storage_path=storage_dir, name="sz",
                   raise_on_failed_trial=False)
    assert [(t.config["x"], str(t.status)) for t in first.trials] == [(1, "TERMINATED"), (2, "ERROR"),
                                                                      (3, "TERMINATED")]
    open(fixed, "w").close()
    again = simple(run_or_experiment=sized, config=grid, storage_path=storage_dir, name="sz", resume=resume,
                   resources_per_trial={"cpu": 2})
    assert sorted((t.config["x"], str(t.status), t.last_result["cpus"]) for t in again.trials) == [
        (1, "TERMINATED", 1.0), (2, "TERMINATED", 2.0), (3, "TERMINATED", 1.0)]


def test_only_the_trials_a_resume_runs_again_change_size(storage_dir: str, tmp_path: Any) -> None:
    from actors._driver.restore import requeued_resources
    from actors._engine.store import RestoreMark

    fixed = str(tmp_path / "fixed")
    simple(run_or_experiment=sized, config={"x": tune.grid_search([1, 2]), "fixed": fixed},
           storage_path=storage_dir, name="one", raise_on_failed_trial=False)
    path = os.path.join(storage_dir, "one")
    skipped = tune.Tuner.restore(path, sized)  # (resume_errored=False: the errored trial is not run again)
    requeued_resources(skipped, {"cpu": 3.0})
    assert skipped._prebuilt.resources_of is None, "nothing runs again: the experiment stays one size"
    assert all("resources" not in r for r in skipped._prebuilt.restore_state["trials"])
    tuner = tune.Tuner.restore(path, sized, resume_errored=True)
    requeued_resources(tuner, {"cpu": 3.0})
    spec = tuner._prebuilt
    assert [(r.get("restore"), r.get("resources")) for r in spec.restore_state["trials"]] == [
        (None, None), (RestoreMark.RESUME, {"cpu": 3.0})]
    # trials the search draws later keep the experiment's own (Ray's restored search generator keeps its spec)
    assert spec.resources_of({"x": 9}) == {"cpu": 1.0}


def test_run_on_the_default_system_leaves_no_process(storage_dir: str, no_leaks: None) -> None:
    a = tune.run(series, config={"x": tune.grid_search([1, 2, 3])}, metric="loss", mode="min",
                 storage_path=storage_dir, name="multi", verbose=0)
    assert a.best_config == {"x": 2}  # recorded (see the grid test)
    assert a.get_best_config("loss", "min", "all") == {"x": 1}
    assert [str(t.status) for t in a.trials] == ["TERMINATED"] * 3
    pids = {t.last_result["pid"] for t in a.trials}
    assert os.getpid() not in pids  # trials ran in other processes
    assert len(pids) == 3  # tune.run's reuse_actors=False (a Tuner's default reuses them): a process each


def test_audition_migrate_ports_a_tune_run_script_without_warnings() -> None:
    from actors._cli.main import _audition_has
    from actors._cli.migrate import migrate

    source = ("from ray import tune\nfrom ray.tune import ExperimentAnalysis\n"
              "from ray.tune.analysis import ExperimentAnalysis as EA\nfrom ray.tune.tune import run\n"
              "analysis = tune.run(train, config={'x': 1}, metric='loss', mode='min')\n")
    result = migrate(source, _audition_has)
    assert result.warnings == []
    assert result.text == ("import actors as tune\nfrom actors import ExperimentAnalysis\n"
                           "from actors import ExperimentAnalysis as EA\nfrom actors import run\n"
                           "analysis = tune.run(train, config={'x': 1}, metric='loss', mode='min')\n")


def test_num_samples_minus_one_samples_until_the_time_budget_ends_the_run(storage_dir: str) -> None:
    # Ray 2.60 (recorded, Tuner and run alike: run maps -1 to sys.maxsize): trials are drawn until the budget
    # ends the run; the 200 drawn ahead (the default generator's pending trials) never ran, and every trial
    # ends TERMINATED (Ray: 202 trials, 2 of them ran, in its 6.2 s). (A budget of 1.5 s: with 0.6 s no trial
    # had reported yet once, under the whole suite's load)
    import sys

    from actors import RunConfig, TuneConfig, Tuner
    from actors._engine.trial import TrialStatus

    for how in ("run", "Tuner"):
        if how == "run":
            trials = [(t.status, t.last_result) for t in simple(
                run_or_experiment=curve, config={"q": tune.uniform(0, 1)}, num_samples=-1, time_budget_s=1.5,
                storage_path=storage_dir, name="forever").trials]
        else:
            grid = Tuner(curve, param_space={"q": tune.uniform(0, 1)},
                         tune_config=TuneConfig(num_samples=-1, time_budget_s=1.5),
                         run_config=RunConfig(storage=storage_dir, name="forever2", system="simple", verbose=0)).fit()
            trials = [(r.status, r.metrics) for r in grid]
        ran = [last for _, last in trials if "training_iteration" in last]
        assert len(trials) - len(ran) == 200 and ran, how
        assert {status for status, _ in trials} == {TrialStatus.TERMINATED}, how
    assert TuneConfig(num_samples=-1).num_samples == -1  # kept as given, as Ray's TuneConfig
    from actors._driver.config import samples

    assert samples(TuneConfig(num_samples=-1)) == sys.maxsize
    with pytest.raises(ConfigError, match=r"num_samples=-2\): use an int >= 1 \(0 runs no trial, as in Ray\), or -1"):
        TuneConfig(num_samples=-2)


def _nine(config: dict[str, Any]) -> None:
    for i in range(9):
        tune.report({"loss": config["a"] / (i + 1)})


def test_a_mode_alone_is_the_mode_of_the_schedulers_metric_as_in_ray(storage_dir: str) -> None:
    """Recorded from Ray 2.60 (tests/data/ray_api_semantics.json): run(mode="min",
    scheduler=ASHAScheduler(metric="loss")) runs ASHA minimizing loss; the analysis compares the unnamed
    "_metric" with that mode, so best_config is None, and get_best_config("loss") takes the mode."""
    from actors.schedulers import ASHAScheduler
    from tests._ray_api import RAY_API

    ray = RAY_API["runs"]["run_mode_only"]
    a = tune.run(_nine, config={"a": tune.grid_search([1, 2, 3, 4])}, mode="min", max_concurrent_trials=1,
                 scheduler=ASHAScheduler(metric="loss", max_t=9, grace_period=1), storage_path=storage_dir,
                 verbose=0, system="simple")
    assert sorted([t.config["a"], t.last_result["training_iteration"]] for t in a.trials) == ray["iterations"]
    assert [a.default_metric, a.default_mode] == ray["default"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert a.best_config == ray["best_config"]
    assert a.get_best_config("loss") == ray["best_loss_config"]
    assert repr([t.status for t in a.trials][:1]) == ray["trial_status_repr"]
