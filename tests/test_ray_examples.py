"""What Ray Tune 2.60's bundled example scripts (``ray/tune/examples/*.py``) show that audition must show too.

Each script was run with ``--smoke-test`` in ``/work/rayvenv`` (Ray 2.60, optuna 5.1.0) and, with its
imports rewritten by ``audition migrate``, under audition; the differences found are held here as
Ray's recorded values.
"""

from __future__ import annotations

from typing import Any

import pytest

from actors.search import OptunaSearch, uniform

optuna = pytest.importorskip("optuna")
optuna.logging.set_verbosity(optuna.logging.WARNING)


def _define_by_run(trial: Any) -> dict[str, Any]:
    trial.suggest_float("x", 0, 1)
    return {"steps": 1}


# Recorded from Ray 2.60 (probe: ``OptunaSearch(space=..., metric="m", mode="min", study_name=...)``, then
# ``searcher._ot_study.study_name``; Optuna logs it as "A new study created in memory with name: optuna",
# the line optuna_example.py, optuna_define_by_run_example.py and optuna_multiobjective_example.py print).
RAY_STUDY_NAMES = [(None, "optuna"), ("", "optuna"), ("my_study", "my_study")]


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


def test_a_restored_optuna_search_keeps_its_study_name() -> None:
    original = OptunaSearch({"x": uniform(0, 1)}, "m", "min", study_name="kept")
    state = original.save()  # before the study exists: the name travels in the state
    resumed = OptunaSearch({"x": uniform(0, 1)}, "m", "min")
    resumed.restore(state)
    resumed.suggest("t0")
    assert resumed.study.study_name == "kept"


def test_a_study_name_that_is_not_a_string_is_refused() -> None:
    with pytest.raises(TypeError, match="study_name must be a str, got int"):
        OptunaSearch({"x": uniform(0, 1)}, "m", "min", study_name=5)  # type: ignore[arg-type]
