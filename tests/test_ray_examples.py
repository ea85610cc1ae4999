"""What Ray Tune 2.60's bundled example scripts (``ray/tune/examples/*.py``) show that audition must show too.

Each script was run with ``--smoke-test`` in ``/work/rayvenv`` (Ray 2.60, optuna 5.1.0) and, with its
imports rewritten by ``audition migrate``, under audition; the differences found are held here as
Ray's recorded values.
"""

from __future__ import annotations

import csv
import json
import os
from typing import Any

import pytest

from actors import Callback, RunConfig, Trainable, Tuner, report
from actors.result import SHOULD_CHECKPOINT
from actors.search import OptunaSearch, uniform

try:
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
except ImportError:  # the Optuna tests skip; the others run
    optuna = None
needs_optuna = pytest.mark.skipif(optuna is None, reason="needs optuna")


def _define_by_run(trial: Any) -> dict[str, Any]:
    trial.suggest_float("x", 0, 1)
    return {"steps": 1}


# Recorded from Ray 2.60 (probe: ``OptunaSearch(space=..., metric="m", mode="min", study_name=...)``, then
# ``searcher._ot_study.study_name``; Optuna logs it as "A new study created in memory with name: optuna",
# the line optuna_example.py, optuna_define_by_run_example.py and optuna_multiobjective_example.py print).
RAY_STUDY_NAMES = [(None, "optuna"), ("", "optuna"), ("my_study", "my_study")]


@needs_optuna
@pytest.mark.parametrize(("given", "ray_name"), RAY_STUDY_NAMES)
def test_optuna_study_is_named_as_rays(given: str | None, ray_name: str) -> None:
    for searcher in (OptunaSearch({"x": uniform(0, 1)}, "m", "min", study_name=given),
                     OptunaSearch(_define_by_run, "m", "min", study_name=given)):
        searcher.suggest("t0")
        assert searcher.study.study_name == ray_name
    late = OptunaSearch(study_name=given)  # the space from the Tuner's param_space (Ray: set_search_properties)
    assert late.set_search_properties("m", "min", {"x": uniform(0, 1)})
    late.suggest("t0")
    assert late.study.study_name == ray_name


@needs_optuna
def test_a_restored_optuna_search_keeps_its_study_name() -> None:
    original = OptunaSearch({"x": uniform(0, 1)}, "m", "min", study_name="kept")
    state = original.save()  # before the study exists: the name travels in the state
    resumed = OptunaSearch({"x": uniform(0, 1)}, "m", "min")
    resumed.restore(state)
    resumed.suggest("t0")
    assert resumed.study.study_name == "kept"


@needs_optuna
def test_a_study_name_that_is_not_a_string_is_refused() -> None:
    with pytest.raises(TypeError, match="study_name must be a str, got int"):
        OptunaSearch({"x": uniform(0, 1)}, "m", "min", study_name=5)  # type: ignore[arg-type]


# custom_checkpointing_with_callback.py: a callback's on_trial_result sets result[SHOULD_CHECKPOINT] = True.
# Recorded from Ray 2.60 (probe: the trainables below, stop={"training_iteration": 3}, callbacks=[_AskAt13(),
# _Later()], then each trial's result.json, progress.csv, Result.metrics and metrics_dataframe): the key is
# in what the later callbacks see and in everything logged, since Ray's loggers run after the user's callbacks.
RAY_ROWS = [True, None, True]  # should_checkpoint of the rows at iterations 1, 2, 3 (None: no key)
RAY_CSV_CELLS = ["True", "", "True"]  # the last progress.csv column, should_checkpoint, row by row
RAY_CLASS_CHECKPOINTS = ["checkpoint_000000", "checkpoint_000001"]  # a function has none (it reports its own)


class _AskAt13(Callback):
    def on_trial_result(self, iteration: int, trials: Any, trial: Any, result: dict[str, Any], **info: Any) -> None:
        if result["training_iteration"] in (1, 3):
            result[SHOULD_CHECKPOINT] = True


class _Later(Callback):
    def __init__(self) -> None:
        self.seen: list[Any] = []

    def on_trial_result(self, iteration: int, trials: Any, trial: Any, result: dict[str, Any], **info: Any) -> None:
        self.seen.append(result.get(SHOULD_CHECKPOINT))


class _Counter(Trainable):
    def setup(self, config: dict[str, Any]) -> None:
        self.i = 0

    def step(self) -> dict[str, Any]:
        self.i += 1
        return {"m": self.i}

    def save_checkpoint(self, checkpoint_dir: str) -> dict[str, Any]:
        return {"i": self.i}

    def load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        self.i = checkpoint["i"]


def _counting(config: dict[str, Any]) -> None:
    for i in range(3):
        report({"m": i})


@pytest.mark.parametrize("trainable", [_Counter, _counting])
def test_a_callbacks_should_checkpoint_is_logged_as_rays(trainable: Any, storage_dir: str) -> None:
    later = _Later()
    grid = Tuner(trainable, run_config=RunConfig(name="sc", storage=storage_dir, stop={"training_iteration": 3},
                                                 callbacks=[_AskAt13(), later], verbose=0, system="simple")).fit()
    result = grid[0]
    assert later.seen == RAY_ROWS
    with open(os.path.join(result.path, "result.json"), encoding="utf-8") as f:
        rows = [json.loads(line) for line in f if line.strip()]
    assert [r.get(SHOULD_CHECKPOINT) for r in rows] == RAY_ROWS
    assert list(rows[0])[-1] == SHOULD_CHECKPOINT  # after iterations_since_restore, as Ray's
    with open(os.path.join(result.path, "progress.csv"), encoding="utf-8") as f:
        header, *cells = list(csv.reader(f))
    assert header[-1] == SHOULD_CHECKPOINT and [c[-1] for c in cells] == RAY_CSV_CELLS
    assert result.metrics[SHOULD_CHECKPOINT] is True
    assert list(result.metrics)[-2:] == [SHOULD_CHECKPOINT, "experiment_tag"]
    frame = result.metrics_dataframe
    assert [v is True for v in frame[SHOULD_CHECKPOINT]] == [True, False, True]
    found = sorted(n for n in os.listdir(result.path) if n.startswith("checkpoint_"))
    assert found == (RAY_CLASS_CHECKPOINTS if trainable is _Counter else [])
