"""Record how Ray Tune saves and resumes a search (the oracle for ``tests/data/ray_search_resume.json``):
a searcher written the way Ray's guide writes one (``save(checkpoint_path)``/``restore(checkpoint_path)``
on a file), ``save_to_dir``/``restore_from_dir``, what a restored experiment draws after a
stopper's ``stop_all`` or ``fail_fast`` ended the search, and what a searcher's and a scheduler's
``set_search_properties`` are given (``**spec``; an old signature; a scheduler answering False).

Run with a Python that has Ray installed, never audition's environment::

    python -m venv /tmp/rayvenv && /tmp/rayvenv/bin/pip install 'ray[tune]==2.60.0'
    /tmp/rayvenv/bin/python benchmarks/ray_oracle/record_search_resume.py tests/data/ray_search_resume.json

``tests/test_search_resume.py`` runs the same scenarios under audition (its searcher and stopper are
this file's, with audition's imports) and compares.
"""

from __future__ import annotations

import json
import os
import pickle
import random
import sys
import tempfile
from typing import Any


def _searcher_class() -> Any:
    from ray.tune.search import Searcher

    class FileSearcher(Searcher):
        """Suggests ``x`` from its own seeded stream and numbers its suggestions; saves to a file."""

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

        def save(self, checkpoint_path: str) -> None:
            with open(checkpoint_path, "wb") as f:
                pickle.dump((self.rng.getstate(), self.count, self.done), f)

        def restore(self, checkpoint_path: str) -> None:
            with open(checkpoint_path, "rb") as f:
                state, self.count, self.done = pickle.load(f)
            self.rng.setstate(state)

    return FileSearcher


def _spec_searcher_class() -> Any:
    from ray.tune.search import Searcher

    class SpecSearcher(Searcher):
        """Keeps what ``set_search_properties`` was given (reprs), suggests ``x`` = 1, 2, ..."""

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

    return SpecSearcher


def _stop_after_three() -> Any:
    from ray.tune import Stopper

    class StopAfterThree(Stopper):
        """``stop_all`` once three trials reported."""

        def __init__(self) -> None:
            self.seen: set[str] = set()

        def __call__(self, trial_id: str, result: dict[str, Any]) -> bool:
            self.seen.add(trial_id)
            return False

        def stop_all(self) -> bool:
            return len(self.seen) >= 3

    return StopAfterThree


def _spec_scheduler_classes() -> Any:
    from ray.tune.schedulers import FIFOScheduler

    class SpecScheduler(FIFOScheduler):
        """Keeps what ``set_search_properties`` was given (reprs); stops every trial at its first result
        when it was told ``num_samples=2`` (so what decides shows whether the deciding copy got the spec)."""

        def __init__(self) -> None:
            super().__init__()
            self.seen: list[Any] = []
            self.spec: dict[str, Any] = {}

        def set_search_properties(self, metric: Any, mode: Any, **spec: Any) -> bool:
            self.seen.append([metric, mode, {k: repr(v) for k, v in sorted(spec.items())}])
            self.spec = spec
            return True

        def on_trial_result(self, tune_controller: Any, trial: Any, result: dict[str, Any]) -> str:
            return self.STOP if self.spec.get("num_samples") == 2 else self.CONTINUE

    class OldScheduler(SpecScheduler):
        def set_search_properties(self, metric: Any, mode: Any) -> bool:  # type: ignore[override]
            self.seen.append([metric, mode])
            return True

    class Refusing(SpecScheduler):
        def set_search_properties(self, metric: Any, mode: Any, **spec: Any) -> bool:
            return False

    return SpecScheduler, OldScheduler, Refusing


def _steps(config: dict[str, Any]) -> None:
    from ray import tune

    for i in range(3):
        tune.report({"score": config["x"] * 10 + i})


def _score_x(config: dict[str, Any]) -> None:
    from ray import tune

    tune.report({"score": config["x"] * 10})


def _three(config: dict[str, Any]) -> None:
    from ray import tune

    if config["i"] == 2 and not os.path.exists(config["flag"]):  # trial 2 fails once
        open(config["flag"], "w").close()
        raise ValueError("boom")
    for it in range(3):
        tune.report({"score": config["i"] + it})


def _rows(results: Any) -> list[list[Any]]:
    """Per trial: its config's ``n`` or ``i``, its last iteration (-1: none), whether it has an error."""
    rows = []
    for r in results:
        config = r.config or {}
        rows.append([config.get("n", config.get("i", -1)), (r.metrics or {}).get("training_iteration", -1),
                     r.error is not None])
    return sorted(rows)


def main() -> None:
    import ray
    from ray import tune
    from ray.tune import FailureConfig, RunConfig, TuneConfig, Tuner

    FileSearcher, StopAfterThree = _searcher_class(), _stop_after_three()
    out: dict[str, Any] = {"ray": ray.__version__}
    store = tempfile.mkdtemp()

    searcher = FileSearcher()
    grid = Tuner(_score_x, tune_config=TuneConfig(search_alg=searcher, metric="score", mode="max", num_samples=4,
                                                  max_concurrent_trials=1),
                 run_config=RunConfig(storage_path=store, name="file_searcher", verbose=0)).fit()
    fresh = FileSearcher()
    fresh.restore_from_dir(os.path.join(store, "file_searcher"))
    out["file_searcher"] = {
        "configs": sorted([r.config["n"], r.config["x"]] for r in grid),
        "after_fit": [searcher.count, len(searcher.done)],
        "restore_from_dir": [fresh.count, len(fresh.done)]}

    searcher = FileSearcher()
    for i in range(3):
        searcher.suggest(str(i))
    where = tempfile.mkdtemp()
    searcher.save_to_dir(where, "session")
    fresh = FileSearcher()
    fresh.restore_from_dir(where)
    out["save_to_dir"] = {"files": sorted(os.listdir(where)), "restored_count": fresh.count,
                          "template": FileSearcher.CKPT_FILE_TMPL}

    SpecSearcher = _spec_searcher_class()
    spec_seen: dict[str, Any] = {}
    for case, space, tune_kw, run_kw in (
            ("with_param_space", {"c": 5}, {"num_samples": 2}, {"stop": {"training_iteration": 5}}),
            ("samples_forever_with_budget", {"c": 5}, {"num_samples": -1, "time_budget_s": 2.0}, {}),
            ("without_param_space", None, {"num_samples": 2}, {})):
        searcher = SpecSearcher()
        Tuner(_score_x, param_space=space, tune_config=TuneConfig(search_alg=searcher, metric="score", mode="max",
                                                                  **tune_kw),
              run_config=RunConfig(storage_path=store, name=case, verbose=0, **run_kw)).fit()
        spec_seen[case] = searcher.seen
    out["set_search_properties"] = spec_seen

    SpecScheduler, OldScheduler, Refusing = _spec_scheduler_classes()
    scheduler_seen: dict[str, Any] = {}
    for case, cls, tune_kw, run_kw in (
            ("with_stop", SpecScheduler, {"num_samples": 2}, {"stop": {"training_iteration": 5}}),
            ("forever_with_budget", SpecScheduler, {"num_samples": -1, "time_budget_s": 2.0}, {}),
            ("old_signature", OldScheduler, {"num_samples": 2}, {})):
        scheduler = cls()
        grid = Tuner(_steps, param_space={"x": tune.grid_search([1, 2])}, tune_config=TuneConfig(
            scheduler=scheduler, metric="score", mode="max", **tune_kw),
            run_config=RunConfig(storage_path=store, name=f"scheduler_{case}", verbose=0, **run_kw)).fit()
        scheduler_seen[case] = {"seen": scheduler.seen,
                                "iterations": sorted({(r.metrics or {}).get("training_iteration") for r in grid})}
    try:
        Tuner(_steps, param_space={"x": tune.grid_search([1, 2])},
              tune_config=TuneConfig(scheduler=Refusing(), metric="score", mode="max"),
              run_config=RunConfig(storage_path=store, name="scheduler_refusing", verbose=0)).fit()
        scheduler_seen["refusing"] = "ran"
    except Exception as exc:  # (Ray wraps nothing here: the ValueError itself)
        scheduler_seen["refusing"] = f"{type(exc).__name__}: {exc}"
    out["scheduler_set_search_properties"] = scheduler_seen

    for case, tune_kw, run_kw, trainable, space in (
            ("file_searcher_stop_all", {"search_alg": FileSearcher(), "num_samples": 6}, {"stop": StopAfterThree()},
             _score_x, None),
            ("grid_stop_all", {}, {"stop": StopAfterThree()}, _three,
             {"i": tune.grid_search([1, 3, 4, 5, 6, 7])}),
            ("fail_fast", {}, {"failure_config": FailureConfig(fail_fast=True)}, _three,
             {"i": tune.grid_search([1, 2, 3, 4]), "flag": os.path.join(store, "flag")})):
        first = Tuner(trainable, param_space=space, tune_config=TuneConfig(
            metric="score", mode="max", max_concurrent_trials=1, **tune_kw),
            run_config=RunConfig(storage_path=store, name=case, verbose=0, **run_kw)).fit()
        second = Tuner.restore(os.path.join(store, case), trainable, resume_unfinished=True).fit()
        out[case] = {"first": _rows(first), "restored": _rows(second)}

    with open(sys.argv[1], "w") as f:
        json.dump(out, f, indent=1, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main()
