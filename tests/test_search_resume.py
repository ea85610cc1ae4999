"""Saving and resuming a search as Ray Tune 2.60 does (recorded by
``benchmarks/ray_oracle/record_search_resume.py`` into ``tests/data/ray_search_resume.json``).

A searcher written the way Ray's guide writes one saves to a file (``save(checkpoint_path)``) and
restores from one; audition's engine keeps that file's bytes in the experiment's state
(``actors.search._file_state``). Ray's ``save_to_dir``/``restore_from_dir`` write and read
``searcher-state-<session>.pkl``. A stopper's ``stop_all`` and ``fail_fast`` end the search for good
(Ray's ``set_finished``): the restored experiment draws no more trials.
"""

from __future__ import annotations

import json
import os
import pickle
import random
from pathlib import Path
from typing import Any

import pytest

from actors import FailureConfig, RunConfig, TuneConfig, Tuner, report
from actors.schedulers import Decision, FIFOScheduler
from actors.search import ConcurrencyLimiter, Searcher, grid_search
from actors.search._file_state import RAY_FILE, load_state, state_of, writes_a_file
from actors.stoppers import Stopper

pytestmark = pytest.mark.timeout(120)

with open(os.path.join(os.path.dirname(__file__), "data", "ray_search_resume.json")) as _f:
    RAY: dict[str, Any] = json.load(_f)


class FileSearcher(Searcher):
    """The recorder's searcher: ``x`` from its own seeded stream, suggestions numbered; saves to a file."""

    def __init__(self, metric: str | None = None, mode: str | None = None) -> None:
        super().__init__(metric=metric, mode=mode)
        self.rng = random.Random(0)
        self.count = 0
        self.done: list[float | None] = []

    def suggest(self, trial_id: str) -> dict[str, Any]:
        self.count += 1
        return {"x": round(self.rng.uniform(0, 1), 4), "n": self.count}

    def on_trial_complete(self, trial_id: str, result: dict[str, Any] | None = None, error: bool = False) -> None:
        self.done.append(result["score"] if result else None)

    def save(self, checkpoint_path: str) -> None:  # type: ignore[override]  # Ray's signature, on purpose
        with open(checkpoint_path, "wb") as f:
            pickle.dump((self.rng.getstate(), self.count, self.done), f)

    def restore(self, checkpoint_path: str) -> None:  # type: ignore[override]
        with open(checkpoint_path, "rb") as f:
            state, self.count, self.done = pickle.load(f)
        self.rng.setstate(state)


class StopAfterThree(Stopper):
    """``stop_all`` once three trials reported."""

    def __init__(self) -> None:
        self.seen: set[str] = set()

    def __call__(self, trial_id: str, result: dict[str, Any]) -> bool:
        self.seen.add(trial_id)
        return False

    def stop_all(self) -> bool:
        return len(self.seen) >= 3


def _score_x(config: dict[str, Any]) -> None:
    report({"score": config["x"] * 10})


def _three(config: dict[str, Any]) -> None:
    if config["i"] == 2 and not os.path.exists(config["flag"]):  # trial 2 fails once
        open(config["flag"], "w").close()
        raise ValueError("boom")
    for it in range(3):
        report({"score": config["i"] + it})


def _rows(results: Any) -> list[list[Any]]:
    rows = []
    for r in results:
        config = r.config or {}
        rows.append([config.get("n", config.get("i", -1)), (r.metrics or {}).get("training_iteration", -1),
                     r.error is not None])
    return sorted(rows)


def _same_rows(ours: list[list[Any]], ray: list[list[Any]]) -> None:
    """Equal rows, where a row Ray gives without a config (-1: a trial that never reported, whose
    ``Result.config`` is None in Ray, the trial's config in audition: docs/coming-from-ray.md) matches
    a row of ours by its iteration and error alone."""
    assert len(ours) == len(ray)
    known = [r for r in ray if r[0] != -1]
    assert [r for r in ours if r in known] == known
    assert sorted(r[1:] for r in ours if r not in known) == sorted(r[1:] for r in ray if r[0] == -1)


@pytest.mark.parametrize("system", ["simple", "multiproc"])
def test_a_searcher_that_saves_to_a_file_runs_and_hands_its_state_back(tmp_path: Path, system: str) -> None:
    """``multiproc``: the searcher runs in the controller's process, so the script's object gets the run's
    final state back through its ``restore(path)``."""
    searcher = FileSearcher()
    grid = Tuner(_score_x, tune_config=TuneConfig(search_alg=searcher, metric="score", mode="max", num_samples=4,
                                                  max_concurrent_trials=1),
                 run_config=RunConfig(storage_path=str(tmp_path), name="file_searcher", system=system,
                                      verbose=0)).fit()
    fresh = FileSearcher()
    fresh.restore_from_dir(str(tmp_path / "file_searcher"))
    ray = RAY["file_searcher"]
    assert sorted([r.config["n"], r.config["x"]] for r in grid) == ray["configs"]
    assert [searcher.count, len(searcher.done)] == ray["after_fit"]
    assert [fresh.count, len(fresh.done)] == ray["restore_from_dir"]


def test_save_to_dir_and_restore_from_dir_as_ray(tmp_path: Path) -> None:
    searcher = FileSearcher()
    for i in range(3):
        searcher.suggest(str(i))
    searcher.save_to_dir(str(tmp_path), "session")
    fresh = FileSearcher()
    fresh.restore_from_dir(str(tmp_path))
    ray = RAY["save_to_dir"]
    assert sorted(os.listdir(tmp_path)) == ray["files"]
    assert fresh.count == ray["restored_count"]
    assert Searcher.CKPT_FILE_TMPL == ray["template"]


def test_save_to_dir_of_a_searcher_that_returns_its_state(tmp_path: Path) -> None:
    """audition's own plugins (``save()`` returns the state) go through the same file."""
    limiter = ConcurrencyLimiter(FileSearcher(), max_concurrent=2)
    limiter.suggest("a")
    limiter.save_to_dir(str(tmp_path))
    assert os.listdir(tmp_path) == ["searcher-state-default.pkl"]
    fresh = ConcurrencyLimiter(FileSearcher(), max_concurrent=2)
    fresh.restore_from_dir(str(tmp_path))
    assert fresh.searcher.count == 1  # type: ignore[attr-defined]
    assert fresh.suggest("b") == {"x": 0.758, "n": 2}  # the stream goes on where it was saved


def test_file_state_round_trip_and_detection() -> None:
    searcher = FileSearcher()
    searcher.suggest("a")
    assert writes_a_file(searcher)
    assert not writes_a_file(ConcurrencyLimiter(FileSearcher(), 1))  # save(checkpoint_path=None): audition's
    state = state_of(searcher)
    assert state["kind"] == "FileSearcher" and isinstance(state[RAY_FILE], bytes)
    fresh = FileSearcher()
    load_state(fresh, state)
    assert fresh.count == 1 and fresh.rng.getstate() == searcher.rng.getstate()
    load_state(fresh, None)  # a file-writing searcher that wrote nothing: kept as it is
    assert fresh.count == 1


class _WritesNothing(FileSearcher):
    def save(self, checkpoint_path: str) -> None:  # type: ignore[override]
        pass


def test_a_searcher_that_writes_no_file_saves_nothing() -> None:
    assert state_of(_WritesNothing()) is None


@pytest.mark.parametrize("case", ["file_searcher_stop_all", "grid_stop_all", "fail_fast"])
def test_a_search_ended_by_stop_all_or_fail_fast_draws_no_more_trials_when_restored(tmp_path: Path,
                                                                                   case: str) -> None:
    """Before, audition's restored run drew the rest of ``num_samples`` (fail_fast: four trials where Ray
    has two), and a ``ConcurrencyLimiter`` still holding a halted trial ended the restored run with
    "the search algorithm suggested no configuration while no trial was running"."""
    tune_kw: dict[str, Any] = {}
    run_kw: dict[str, Any] = {}
    space: dict[str, Any] | None = None
    trainable: Any = _three
    if case == "file_searcher_stop_all":
        tune_kw, run_kw, trainable = {"search_alg": FileSearcher(), "num_samples": 6}, {"stop": StopAfterThree()}, \
            _score_x
    elif case == "grid_stop_all":
        run_kw, space = {"stop": StopAfterThree()}, {"i": grid_search([1, 3, 4, 5, 6, 7])}
    else:
        run_kw = {"failure_config": FailureConfig(fail_fast=True)}
        space = {"i": grid_search([1, 2, 3, 4]), "flag": str(tmp_path / "flag")}
    first = Tuner(trainable, param_space=space, tune_config=TuneConfig(
        metric="score", mode="max", max_concurrent_trials=1, **tune_kw),
        run_config=RunConfig(storage_path=str(tmp_path), name=case, system="simple", verbose=0, **run_kw)).fit()
    second = Tuner.restore(str(tmp_path / case), trainable, resume_unfinished=True).fit()
    _same_rows(_rows(first), RAY[case]["first"])
    _same_rows(_rows(second), RAY[case]["restored"])


def test_a_file_searcher_the_tuner_does_not_wrap_is_saved_too(tmp_path: Path) -> None:
    """No ``param_space`` and no ``max_concurrent_trials``: the engine saves the searcher itself."""
    searcher = FileSearcher()
    Tuner(_score_x, tune_config=TuneConfig(search_alg=searcher, metric="score", mode="max", num_samples=3),
          run_config=RunConfig(storage_path=str(tmp_path), name="bare", system="simple", verbose=0)).fit()
    fresh = FileSearcher()
    fresh.restore_from_dir(str(tmp_path / "bare"))
    assert [searcher.count, len(searcher.done)] == [fresh.count, len(fresh.done)] == [3, 3]


def _fails_once(config: dict[str, Any]) -> None:
    flag = os.environ["SEARCH_RESUME_FLAG"]  # (not in the config: a param_space would wrap the searcher)
    if config["n"] == 2 and not os.path.exists(flag):
        open(flag, "w").close()
        raise ValueError("boom")
    report({"score": config["x"] * 10})


def test_an_aborted_run_restores_a_file_searcher_and_goes_on(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``fail_fast="raise"`` aborts (the search is not ended for good): the restored run gets the file
    searcher's saved state back through ``restore(path)`` and its completions add to the saved ones."""
    monkeypatch.setenv("SEARCH_RESUME_FLAG", str(tmp_path / "flag"))
    with pytest.raises(Exception, match="boom"):
        Tuner(_fails_once,
              tune_config=TuneConfig(search_alg=FileSearcher(), metric="score", mode="max", num_samples=4),
              run_config=RunConfig(storage_path=str(tmp_path), name="aborted", system="simple", verbose=0,
                                   failure_config=FailureConfig(fail_fast="raise"))).fit()
    grid = Tuner.restore(str(tmp_path / "aborted"), _fails_once, resume_errored=True).fit()
    fresh = FileSearcher()
    fresh.restore_from_dir(str(tmp_path / "aborted"))
    assert sorted(r.config["n"] for r in grid) == [1, 2, 3, 4]
    assert fresh.count == 4  # (the first run's completions were restored: all four trials' scores are there)
    assert sorted(d for d in fresh.done if d is not None) == sorted(r.metrics["score"] for r in grid)


def test_a_script_that_imports_only_the_search_package_saves_and_restores(tmp_path: Path) -> None:
    """The files' I/O is loaded when first asked for (a fresh process: here it is loaded already)."""
    import subprocess
    import sys

    code = ("import sys\n"
            "from actors.search import BasicVariantGenerator, uniform\n"
            "g = BasicVariantGenerator()\n"
            "g.save_to_dir(sys.argv[1], 'one')\n"
            "BasicVariantGenerator().restore_from_dir(sys.argv[1])\n"
            "try:\n"
            "    BasicVariantGenerator().restore_from_dir(sys.argv[2])\n"
            "except Exception as exc:\n"
            "    print(type(exc).__name__, exc)\n")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path), str(tmp_path / "none")], capture_output=True,
                         text=True, timeout=60, env={**os.environ, "PYTHONPATH": root}, check=False)
    assert out.returncode == 0, out.stderr
    assert os.listdir(tmp_path) == ["searcher-state-one.pkl"]
    assert out.stdout.startswith("ConfigError no searcher state was saved under"), out.stdout


class _RestoreFailsWhenAsked(FileSearcher):
    def restore(self, checkpoint_path: str) -> None:  # type: ignore[override]
        if os.environ.get("SEARCH_RESUME_FAIL"):
            raise ValueError("cannot read my file")
        super().restore(checkpoint_path)


def test_a_searcher_whose_restore_raises_ends_the_restore_clearly_and_changes_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SEARCH_RESUME_FLAG", str(tmp_path / "flag"))
    with pytest.raises(Exception, match="boom"):  # an aborted run, so the restore has trials to resume
        Tuner(_fails_once, tune_config=TuneConfig(search_alg=_RestoreFailsWhenAsked(), metric="score", mode="max",
                                                  num_samples=4),
              run_config=RunConfig(storage_path=str(tmp_path), name="e", system="simple", verbose=0,
                                   failure_config=FailureConfig(fail_fast="raise"))).fit()
    experiment = tmp_path / "e"
    from storage import ExperimentLayout, StorageContext, read_experiment_state

    ctx = StorageContext(str(tmp_path))
    prefix = read_experiment_state(ctx, ExperimentLayout(ctx, "e"))["trial_prefix"]
    (experiment / f"{prefix}_00099").mkdir()  # a trial's directory newer than the state: a restore removes it
    before = sorted(str(p.relative_to(experiment)) for p in experiment.rglob("*"))
    monkeypatch.setenv("SEARCH_RESUME_FAIL", "1")
    with pytest.raises(Exception) as failed:
        Tuner.restore(str(experiment), _fails_once, resume_errored=True).fit()
    message = str(failed.value)
    assert ("the experiment could not be restored: _RestoreFailsWhenAsked.restore() raised ValueError: cannot read "
            "my file") in message and "fix _RestoreFailsWhenAsked.restore()" in message
    assert "controller could not start" not in message
    after = sorted(str(p.relative_to(experiment)) for p in experiment.rglob("*"))
    assert [p for p in before if p not in after] == []  # nothing is gone: the searcher was restored first
    monkeypatch.delenv("SEARCH_RESUME_FAIL")
    grid = Tuner.restore(str(experiment), _fails_once, resume_errored=True).fit()
    assert sorted(r.config["n"] for r in grid) == [1, 2, 3, 4] and not grid.errors
    assert not (experiment / f"{prefix}_00099").exists()  # (the restore that ran did clean up)


class SpecSearcher(Searcher):
    """The recorder's: keeps what ``set_search_properties`` was given (reprs), suggests ``x`` = 1, 2, ..."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[Any] = []
        self.n = 0

    def set_search_properties(self, metric: Any, mode: Any, config: Any, **spec: Any) -> bool:
        self.seen.append([metric, mode, sorted(config), {k: repr(v) for k, v in sorted(spec.items())}])
        return True

    def suggest(self, trial_id: str) -> dict[str, Any]:
        self.n += 1
        return {"x": self.n}

    def on_trial_complete(self, trial_id: str, result: Any = None, error: bool = False) -> None:
        pass


@pytest.mark.parametrize(("case", "space", "tune_kw", "run_kw"), [
    ("with_param_space", {"c": 5}, {"num_samples": 2}, {"stop": {"training_iteration": 5}}),
    ("samples_forever_with_budget", {"c": 5}, {"num_samples": -1, "time_budget_s": 2.0}, {}),
    ("without_param_space", None, {"num_samples": 2}, {})])
def test_a_searcher_gets_the_experiments_spec_as_rays(tmp_path: Path, case: str, space: Any, tune_kw: dict[str, Any],
                                                      run_kw: dict[str, Any]) -> None:
    """Ray passes ``num_samples`` (-1 as ``sys.maxsize``), ``stop`` (``{}`` when none) and ``time_budget_s`` to
    ``set_search_properties``; before, audition passed none of them. One difference kept (documented): without
    a ``param_space`` Ray never calls it, audition does (the searcher learns TuneConfig's metric and mode)."""
    searcher = SpecSearcher()
    grid = Tuner(_score_x_of_n, param_space=space, tune_config=TuneConfig(search_alg=searcher, metric="score",
                                                                         mode="max", **tune_kw),
                 run_config=RunConfig(storage_path=str(tmp_path), name=case, system="simple", verbose=0,
                                      **run_kw)).fit()
    assert grid
    ray = RAY["set_search_properties"][case]
    if case == "without_param_space":
        assert ray == [] and searcher.seen == [["score", "max", [], {
            "num_samples": "2", "stop": "{}", "time_budget_s": "None"}]]
    else:
        assert searcher.seen == ray


def _score_x_of_n(config: dict[str, Any]) -> None:
    report({"score": config["x"]})


class _OldSignature(SpecSearcher):
    def set_search_properties(self, metric: Any, mode: Any, config: Any) -> bool:  # type: ignore[override]
        self.seen.append([metric, mode, sorted(config)])
        return True


def test_a_searcher_written_before_the_spec_is_called_without_it(tmp_path: Path,
                                                                 caplog: pytest.LogCaptureFixture) -> None:
    searcher = _OldSignature()
    Tuner(_score_x_of_n, param_space={"c": 5}, tune_config=TuneConfig(search_alg=searcher, metric="score",
                                                                      mode="max", num_samples=1),
          run_config=RunConfig(storage_path=str(tmp_path), name="old", system="simple", verbose=0)).fit()
    assert searcher.seen == [["score", "max", ["c"]]]
    assert "add **spec to its parameters" in caplog.text


class SpecScheduler(FIFOScheduler):
    """The recorder's: keeps what ``set_search_properties`` was given (reprs); stops every trial at its first
    result when it was told ``num_samples=2`` (what decides is the scheduler actor's copy, not this object)."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[Any] = []
        self.spec: dict[str, Any] = {}

    def set_search_properties(self, metric: Any, mode: Any, **spec: Any) -> bool:
        self.seen.append([metric, mode, {k: repr(v) for k, v in sorted(spec.items())}])
        self.spec = spec
        return True

    def on_trial_result(self, tune_controller: Any, trial: Any, result: dict[str, Any]) -> Decision:
        return self.STOP if self.spec.get("num_samples") == 2 else self.CONTINUE


class OldScheduler(SpecScheduler):
    def set_search_properties(self, metric: Any, mode: Any) -> bool:  # type: ignore[override]
        self.seen.append([metric, mode])
        return True


class Refusing(SpecScheduler):
    def set_search_properties(self, metric: Any, mode: Any, **spec: Any) -> bool:
        return False


def _steps(config: dict[str, Any]) -> None:
    for i in range(3):
        report({"score": config["x"] * 10 + i})


@pytest.mark.parametrize(("case", "cls", "tune_kw", "run_kw", "system"), [
    ("with_stop", SpecScheduler, {"num_samples": 2}, {"stop": {"training_iteration": 5}}, "simple"),
    ("with_stop", SpecScheduler, {"num_samples": 2}, {"stop": {"training_iteration": 5}}, "multiproc"),
    ("forever_with_budget", SpecScheduler, {"num_samples": -1, "time_budget_s": 2.0}, {}, "simple"),
    ("old_signature", OldScheduler, {"num_samples": 2}, {}, "simple")])
def test_a_scheduler_gets_the_experiments_spec_as_rays(tmp_path: Path, case: str, cls: type[SpecScheduler],
                                                       tune_kw: dict[str, Any], run_kw: dict[str, Any], system: str,
                                                       caplog: pytest.LogCaptureFixture) -> None:
    """Ray passes a scheduler's ``set_search_properties`` the same ``**spec`` as a searcher's (before, audition
    passed none), and an old signature is called without it, with a warning. The copy that decides, in the
    scheduler actor, gets it too: told ``num_samples=2`` it stops every trial at its first result, as Ray's."""
    scheduler = cls()
    grid = Tuner(_steps, param_space={"x": grid_search([1, 2])}, tune_config=TuneConfig(
        scheduler=scheduler, metric="score", mode="max", **tune_kw),
        run_config=RunConfig(storage_path=str(tmp_path), name=case, system=system, verbose=0, **run_kw)).fit()
    ray = RAY["scheduler_set_search_properties"][case]
    assert scheduler.seen == ray["seen"]  # the driver's object: called once, as Ray's
    if case != "forever_with_budget":  # (Ray's 2 s ended before a trial reported; audition's did not)
        assert sorted({r.metrics.get("training_iteration") for r in grid}) == ray["iterations"]
    assert ("add **spec to its parameters" in caplog.text) is (case == "old_signature")


def test_a_scheduler_refusing_the_experiments_objective_is_refused_as_rays(tmp_path: Path) -> None:
    """Ray raises ``ValueError`` when a scheduler's ``set_search_properties`` returns False (it has its own
    metric/mode); audition raises its ``ConfigError`` (a ``ValueError``) from ``Tuner(...)``, naming it."""
    assert RAY["scheduler_set_search_properties"]["refusing"].startswith("ValueError: You passed a `metric`")
    with pytest.raises(ValueError, match=r"Refusing.set_search_properties\(\) refused the experiment's metric/mode"):
        Tuner(_steps, param_space={"x": grid_search([1, 2])},
              tune_config=TuneConfig(scheduler=Refusing(), metric="score", mode="max"),
              run_config=RunConfig(storage_path=str(tmp_path), name="refusing", system="simple", verbose=0))
    assert not any(tmp_path.iterdir())  # nothing written


def test_save_to_dir_follows_a_searchers_own_file_template(tmp_path: Path) -> None:
    """Ray's ``save_to_dir``/``restore_from_dir`` read ``self.CKPT_FILE_TMPL``, so a subclass may rename the file."""

    class Renamed(FileSearcher):
        CKPT_FILE_TMPL = "my-searcher-{}.pkl"

    searcher = Renamed()
    searcher.suggest("a")
    searcher.save_to_dir(str(tmp_path), "s")
    assert os.listdir(tmp_path) == ["my-searcher-s.pkl"]
    fresh = Renamed()
    fresh.restore_from_dir(str(tmp_path))
    assert fresh.count == 1
