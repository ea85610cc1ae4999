"""Ray Tune's ``ResumeConfig``: ``Tuner.restore(_resume_config=...)`` and ``run(resume_config=...)``.

The expected outcomes were recorded from Ray 2.60 on the same experiment (``tests/_driver_script.py``'s
``broken``: a grid of x=1.0, which finishes 6 steps, and x=2.0, which raises at the fourth; every step
reports a checkpoint; restored with the bug fixed).
"""

from __future__ import annotations

import os
from typing import Any

import pytest

import actors
from actors import ResumeConfig, Tuner
from actors._driver.errors import ConfigError
from actors._driver.restore import _rewind
from actors._driver.resume import ResumeChoices, ResumeType, choices_of, flags_choices
from actors._engine.store import RestoreMark
from actors._engine.trial import TrialStatus, tag_of
from tests import _driver_script as D

R = ResumeConfig.ResumeType


def _its(result: Any) -> list[int]:
    return [h["training_iteration"] for h in result.metrics_history]


def _from(result: Any) -> list[int]:
    return [h["restored_from"] for h in result.metrics_history]


def test_finished_restarted_as_a_new_trial_and_errored_resumed(storage_dir, no_leaks):
    first = D.errored_run(storage_dir, "simple")
    ids = {r.config["x"]: r.trial_id for r in first}
    grid = Tuner.restore(first.experiment_path, D.fixed,
                         _resume_config=ResumeConfig(finished=R.RESTART, errored=R.RESUME)).fit()
    by_x = {r.config["x"]: r for r in grid}
    assert len(grid) == 2 and all(r.status is TrialStatus.TERMINATED for r in grid)
    done = by_x[1.0]  # Ray: a new id, a new directory, the whole run again
    assert done.trial_id != ids[1.0] and len(done.trial_id) == 8
    assert _its(done) == [1, 2, 3, 4, 5, 6] and _from(done) == [-1] * 6
    assert done.metrics["experiment_tag"] == "0_x=1.0000"
    assert os.path.isdir(next(r.path for r in first if r.config["x"] == 1.0))  # the old directory stays
    bad = by_x[2.0]  # Ray: the same trial, from the checkpoint of its third step
    assert bad.trial_id == ids[2.0] and _from(bad) == [-1, -1, -1, 2, 2, 2]


def test_finished_resumed_from_its_checkpoint_and_errored_kept(storage_dir, no_leaks):
    first = D.errored_run(storage_dir, "simple")
    before = {r.config["x"]: r for r in first}
    grid = Tuner.restore(first.experiment_path, D.fixed, _resume_config=ResumeConfig(finished="resume")).fit()
    by_x = {r.config["x"]: r for r in grid}
    # Ray: the finished trial runs again from its last checkpoint (step 5), so reports nothing more
    assert by_x[1.0].status is TrialStatus.TERMINATED and by_x[1.0].trial_id == before[1.0].trial_id
    assert by_x[1.0].metrics_history == before[1.0].metrics_history
    assert by_x[2.0].status is TrialStatus.ERROR and _its(by_x[2.0]) == [1, 2, 3]


def test_errored_restart_through_resume_config_and_run(storage_dir, no_leaks):
    first = D.errored_run(storage_dir, "simple")
    old = next(r.trial_id for r in first if r.error)
    # run(resume_config=...) resumes whatever resume= says, as Ray's tune.run
    analysis = actors.run(D.fixed, config={"x": actors.grid_search([1.0, 2.0])}, metric="loss", mode="min",
                          name=D.NAME, storage_path=storage_dir, system="simple", verbose=0, resume=False,
                          resume_config=ResumeConfig(errored=ResumeType.RESTART))
    trials = {t.config["x"]: t for t in analysis.trials}
    assert {t.status for t in trials.values()} == {TrialStatus.TERMINATED}
    assert trials[2.0].trial_id != old and trials[2.0].last_result["training_iteration"] == 6


def test_bad_resume_configs_are_refused_before_anything_runs(storage_dir, no_leaks):
    first = D.errored_run(storage_dir, "simple")
    path = first.experiment_path
    with pytest.raises(ConfigError, match=r"unfinished=RESTART is not supported.*use RESUME .* or SKIP"):
        Tuner.restore(path, D.fixed, _resume_config=ResumeConfig(unfinished=R.RESTART))
    with pytest.raises(ConfigError, match=r"_resume_config=\.\.\.\)\.errored='again' is not a resume type"):
        Tuner.restore(path, D.fixed, _resume_config=ResumeConfig(errored="again"))
    with pytest.raises(ConfigError, match="must be a ResumeConfig, got dict"):
        Tuner.restore(path, D.fixed, _resume_config={"errored": "restart"})
    with pytest.raises(ConfigError, match=r"run\(resume_config=\.\.\.\)\.finished=3 is not a resume type"):
        actors.run(D.fixed, name=D.NAME, storage_path=storage_dir, system="simple", verbose=0,
                   resume_config=ResumeConfig(finished=3))
    assert Tuner.can_restore(path)  # nothing was touched


def test_flags_map_to_resume_types_as_ray_tuner_restore() -> None:
    assert flags_choices(True, False, False) == ResumeChoices() == choices_of(ResumeConfig(), "x")
    assert flags_choices(False, False, False).unfinished is ResumeType.SKIP
    assert flags_choices(True, True, False).errored is ResumeType.RESUME
    assert flags_choices(True, False, True).errored is ResumeType.RESTART
    assert flags_choices(True, True, True).errored is ResumeType.RESUME  # Ray: resume_errored wins
    assert choices_of(ResumeConfig(finished="Restart"), "x").finished is ResumeType.RESTART


def _state() -> dict[str, Any]:
    rows = [{"trial_id": f"p_{i:05d}", "config": {"i": i}, "status": s.value, "dirname": f"t_{i}",
             "last_result": {"training_iteration": 2}, "num_failures": 1 if s is TrialStatus.ERROR else 0,
             "error": "boom" if s is TrialStatus.ERROR else None, "traceback": None, "marks": [],
             "checkpoint": None, "logged_iteration": 2, "max_index": 1}
            for i, s in enumerate(TrialStatus)]
    return {"trial_prefix": "p", "trial_dirs": "named", "suggested": len(rows), "trials": rows}


@pytest.mark.parametrize("finished", list(ResumeType))
@pytest.mark.parametrize("unfinished", [ResumeType.RESUME, ResumeType.SKIP])
@pytest.mark.parametrize("errored", list(ResumeType))
def test_each_status_rewound_as_ray_requeues_it(finished, unfinished, errored) -> None:
    state = _state()
    out = _rewind(state, ResumeChoices(finished, unfinished, errored))
    assert [r["trial_id"] for r in state["trials"]] == [f"p_{i:05d}" for i in range(5)]  # the input: untouched
    assert len(out["trials"]) == 5 and out["restored"]
    for before, row in zip(state["trials"], out["trials"]):
        status = TrialStatus(before["status"])
        how = errored if status is TrialStatus.ERROR else finished if status.is_finished else unfinished
        if how is ResumeType.RESTART:
            assert row["trial_id"] != before["trial_id"] and len(row["trial_id"]) == 8
            assert row["status"] == "PENDING" and row["restore"] == RestoreMark.RESTART
            assert row["config"] == before["config"]
            assert row["experiment_tag"] == tag_of(before["trial_id"], before["config"], None)[0]
            assert (row["last_result"], row["num_failures"], row["checkpoint"], row["error"]) == ({}, 0, None, None)
            assert before["dirname"] in out["kept_dirs"]
        elif how is ResumeType.RESUME:
            kept = "PAUSED" if status is TrialStatus.PAUSED else "PENDING"  # the scheduler resumes a paused one
            assert (row["trial_id"], row["status"], row["restore"], row["error"]) == (
                before["trial_id"], kept, RestoreMark.RESUME, None)
        elif status.is_finished:
            assert row == before  # kept as it ended, errors and all
        else:
            assert (row["status"], row["restore"]) == ("TERMINATED", RestoreMark.END)
    restarted = [r["trial_id"] for r in out["trials"] if r.get("restore") == RestoreMark.RESTART]
    assert restarted == [r["trial_id"] for r in _rewind(state, ResumeChoices(finished, unfinished, errored))[
        "trials"] if r.get("restore") == RestoreMark.RESTART]  # repeatable: a restore may be tried again


def _named(trial: Any) -> str:
    return f"n_{trial.trial_id}"


def _dirnamed(trial: Any) -> str:
    return f"d_{trial.trial_id}"


def test_a_restarted_trial_is_named_by_the_name_creators_as_a_new_one(storage_dir, no_leaks):
    from actors import RunConfig, TuneConfig
    from actors.search import grid_search

    first = Tuner(D.broken, param_space={"x": grid_search([1.0, 2.0])},
                  tune_config=TuneConfig(metric="loss", mode="min", trial_name_creator=_named,
                                         trial_dirname_creator=_dirnamed),
                  run_config=RunConfig(name=D.NAME, storage=storage_dir, system="simple", verbose=0)).fit()
    old = next(r for r in first if r.error)
    grid = Tuner.restore(first.experiment_path, D.fixed, restart_errored=True).fit()
    new = next(r for r in grid if r.config["x"] == 2.0)
    assert new.trial_id != old.trial_id and new.status is TrialStatus.TERMINATED
    assert os.path.basename(new.path) == f"d_{new.trial_id}" and os.path.isdir(old.path)
    assert sorted(os.listdir(first.experiment_path)) == sorted(
        [f"d_{r.trial_id}" for r in first] + [f"d_{new.trial_id}"] + [
            f for f in os.listdir(first.experiment_path) if not f.startswith("d_")])


def test_a_restarted_trial_keeps_its_tag_when_its_new_id_is_all_digits() -> None:
    # the new id is 8 hex digits; about 1 in 43 is all decimal digits, which once read as a trial index
    from actors._engine.lifecycle import TrialTable
    from actors._shell.experiment_state import trial_row

    state = _state()
    prefix = next(p for p in (f"q{i}" for i in range(10_000)) if _rewind(
        {**state, "trial_prefix": p}, ResumeChoices(errored=ResumeType.RESTART))["trials"][4]["trial_id"].isdigit())
    row = _rewind({**state, "trial_prefix": prefix}, ResumeChoices(errored=ResumeType.RESTART))["trials"][4]
    assert row["experiment_tag"] == tag_of("p_00004", {"i": 4}, None)[0] == "5_i=4"
    assert tag_of(row["trial_id"], {"i": 4}, None) == tag_of("abc", {"i": 4}, None)  # no index in it
    rec = TrialTable().add(row["trial_id"], row["config"])
    rec.tag = row["experiment_tag"]
    assert trial_row(rec, 0, -1)["experiment_tag"] == "5_i=4"  # saved with the row, so restored as it was


@pytest.mark.parametrize("store", ["local", "memory", pytest.param("s3", marks=pytest.mark.s3)])
def test_a_restart_keeps_the_old_trials_directory_on_every_backend(store, storage_dir, request, no_leaks):
    import uuid

    import fsspec

    from actors import RunConfig, TuneConfig
    from actors.search import grid_search

    if store == "s3":
        url, options = request.getfixturevalue("s3_location")
    elif store == "memory":
        url, options = f"memory://restart-{uuid.uuid4().hex}", {}
    else:
        url, options = storage_dir, {}
    first = Tuner(D.broken, param_space={"x": grid_search([1.0, 2.0])},
                  tune_config=TuneConfig(metric="loss", mode="min"),
                  run_config=RunConfig(name=D.NAME, storage=url, storage_options=options, system="simple",
                                       verbose=0)).fit()
    old = next(r for r in first if r.error)
    grid = Tuner.restore(first.experiment_path, D.fixed, restart_errored=True, storage_options=options).fit()
    new = next(r for r in grid if r.config["x"] == 2.0)
    assert new.trial_id != old.trial_id and new.status is TrialStatus.TERMINATED and len(new.metrics_history) == 6
    again = Tuner.restore(first.experiment_path, D.fixed, storage_options=options).fit()
    assert {r.trial_id for r in again} == {r.trial_id for r in grid}
    fs, root = fsspec.core.url_to_fs(first.experiment_path, **options)
    names = {n.rstrip("/").rsplit("/", 1)[-1] for n in fs.ls(root, detail=False)}
    assert {os.path.basename(r.path) for r in [*first, new]} <= names  # the old errored one's too


def _refuses_new_ids(trial: Any) -> str:
    if "_" not in trial.trial_id:
        raise RuntimeError("no name for a restarted trial")
    return f"n_{trial.trial_id}"


def test_a_name_creator_failing_for_a_restarted_trial_ends_the_run_naming_it(storage_dir, no_leaks):
    from actors import RunConfig, TuneConfig
    from actors.search import grid_search

    first = Tuner(D.broken, param_space={"x": grid_search([1.0, 2.0])},
                  tune_config=TuneConfig(metric="loss", mode="min", trial_name_creator=_refuses_new_ids),
                  run_config=RunConfig(name=D.NAME, storage=storage_dir, system="simple", verbose=0)).fit()
    with pytest.raises(Exception, match=r"trial_name_creator.*no name for a restarted trial") as info:
        Tuner.restore(first.experiment_path, D.fixed, restart_errored=True).fit()
    assert "Traceback" not in str(info.value)
