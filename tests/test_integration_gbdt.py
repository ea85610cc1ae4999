"""``actors.integration.xgboost`` / ``.lightgbm``: Ray Tune 2.60's ``TuneReportCheckpointCallback``s.

``RAY`` was recorded from Ray 2.60 (xgboost 3.2.0, lightgbm 4.7.0) running ``train`` below with Ray's
callbacks: per case, the number of reported results, the iterations that carried a checkpoint, the
metric keys reported, the files in a checkpoint, and what ``get_model`` gave back. The values themselves
are checked against the library's own evaluation record of the same training (deterministic: one thread,
fixed seeds), so a new library release does not break the test. No test imports Ray.
"""

from __future__ import annotations

import math
import os
from typing import Any

import pytest

from actors import RunConfig, Tuner
from actors.search import grid_search
from tests._lean import lazy, needs

pytestmark = needs("xgboost", "lightgbm", "sklearn")
# (imported by the tests, not at collection, with scikit-learn, SciPy and pandas: tests/_lean.py)
xgb, lgb, np = lazy("xgboost"), lazy("lightgbm"), lazy("numpy")
datasets, model_selection = lazy("sklearn.datasets"), lazy("sklearn.model_selection")
alg, axg = lazy("actors.integration.lightgbm"), lazy("actors.integration.xgboost")

CASES: dict[str, dict[str, Any]] = {
    "x_freq1": dict(frequency=1, filename="booster.json"),
    "x_freq2_end": dict(frequency=2),
    "x_end_only": dict(),
    "x_no_ckpt": dict(checkpoint_at_end=False),
    "x_metrics_dict": dict(metrics={"loss": "test-logloss", "err": "train-error"}, frequency=3),
    "x_metrics_str": dict(metrics="test-error"),
    "x_cv": dict(results_postprocessing_fn="mean", frequency=0),
    "x_cv_noend": dict(results_postprocessing_fn="mean", checkpoint_at_end=False),
    "x_cv_raw": dict(checkpoint_at_end=False, metrics=["test-logloss"]),
    "l_freq1": dict(frequency=1),
    "l_end_only": dict(),
    "l_metrics_dict": dict(metrics={"loss": "test-binary_logloss"}, frequency=2, filename="m.txt"),
    "l_no_ckpt": dict(checkpoint_at_end=False, metrics=["test-binary_error"]),
    "l_cv": dict(frequency=0),
}
XKEYS = ["test-error", "test-logloss", "train-error", "train-logloss"]
LKEYS = ["test-binary_error", "test-binary_logloss"]
LCV = ["valid-binary_error-mean", "valid-binary_error-stdv", "valid-binary_logloss-mean", "valid-binary_logloss-stdv"]
RAY: dict[str, Any] = {  # (results, checkpointed iterations, keys, checkpoint files, get_model) or the error
    "l_cv": (4, [4], LCV, ["model.txt"], "raised LightGBMError"),
    "l_end_only": (5, [5], LKEYS, ["model.txt"], "Booster:5"),
    "l_freq1": (5, [1, 2, 3, 4, 5], LKEYS, ["model.txt"], "Booster:5"),
    "l_metrics_dict": (5, [2, 4, 5], ["loss"], ["m.txt"], "Booster:5"),
    "l_no_ckpt": (5, [], ["test-binary_error"], None, None),
    "x_cv": "AttributeError: '_PackedBooster' object has no attribute 'save_model'",
    "x_cv_noend": (4, [], XKEYS, None, None),
    "x_cv_raw": (4, [], ["test-logloss"], None, None),
    "x_end_only": (6, [6], XKEYS, ["model.ubj"], "Booster:5"),  # (the end checkpoint: one more report)
    "x_freq1": (5, [1, 2, 3, 4, 5], XKEYS, ["booster.json"], "Booster:5"),
    "x_freq2_end": (6, [2, 4, 6], XKEYS, ["model.ubj"], "Booster:5"),
    "x_metrics_dict": (6, [3, 6], ["err", "loss"], ["model.ubj"], "Booster:5"),
    "x_metrics_str": (6, [6], ["test-error"], ["model.ubj"], "Booster:5"),
    "x_no_ckpt": (5, [], XKEYS, None, None),
}
XPARAMS = {"objective": "binary:logistic", "eval_metric": ["logloss", "error"], "max_depth": 3, "eta": 0.3,
           "seed": 0, "nthread": 1}
LPARAMS = {"objective": "binary", "metric": ["binary_logloss", "binary_error"], "num_leaves": 7, "verbose": -1,
           "seed": 0, "num_threads": 1, "deterministic": True}


def _data() -> tuple[Any, ...]:
    data, labels = datasets.load_breast_cancer(return_X_y=True)
    return (data, labels, *model_selection.train_test_split(data, labels, test_size=0.25, random_state=0))


def _mean(d: dict[str, Any]) -> dict[str, float]:
    return {k: float(np.mean(v)) for k, v in d.items()}


def _fit(case: str, callbacks: list[Any]) -> dict[str, Any]:
    """Train as the case does with ``callbacks``; returns the library's own evaluation record."""
    data, labels, tx, vx, ty, vy = _data()
    record: dict[str, Any] = {}
    if case.startswith("x_cv"):
        return dict(xgb.cv(XPARAMS, xgb.DMatrix(data, label=labels), num_boost_round=4, nfold=3, seed=0,
                           verbose_eval=False, callbacks=callbacks, as_pandas=False))
    if case.startswith("x"):
        xgb.train(XPARAMS, xgb.DMatrix(tx, label=ty), num_boost_round=5, evals_result=record, verbose_eval=False,
                  evals=[(xgb.DMatrix(tx, label=ty), "train"), (xgb.DMatrix(vx, label=vy), "test")],
                  callbacks=callbacks)
        return record
    if case == "l_cv":
        return dict(lgb.cv(LPARAMS, lgb.Dataset(data, label=labels), num_boost_round=4, nfold=3, seed=0,
                           callbacks=callbacks))
    lgb.train(LPARAMS, lgb.Dataset(tx, label=ty), num_boost_round=5, valid_sets=[lgb.Dataset(vx, label=vy)],
              valid_names=["test"], callbacks=[*callbacks, lgb.record_evaluation(record)])
    return record


def _callback(case: str) -> Any:
    kw = dict(CASES[case])
    if kw.get("results_postprocessing_fn") == "mean":
        kw["results_postprocessing_fn"] = _mean
    return (axg if case.startswith("x") else alg).TuneReportCheckpointCallback(**kw)


def train(config: dict[str, Any]) -> None:
    _fit(config["case"], [_callback(config["case"])])


def _expected_values(case: str, rows: int) -> list[dict[str, Any]]:
    """What each report should hold, from the library's record of the same training without Tune."""
    record = _fit(case, [])
    if case == "x_cv_raw":  # an unprocessed cv log: [mean, std] of the round
        return [{"test-logloss": [record["test-logloss-mean"][i], record["test-logloss-std"][i]]}
                for i in range(rows)]
    if case.startswith("x_cv"):
        return [{k: float(np.mean([record[f"{k}-mean"][i], record[f"{k}-std"][i]])) for k in XKEYS}
                for i in range(rows)]
    if case == "l_cv":
        return [{f"valid-{m}-{s}": record[f"valid {m}-{s}"][i] for m in ("binary_error", "binary_logloss")
                 for s in ("mean", "stdv")} for i in range(rows)]
    flat = {f"{data}-{metric}": values for data, per in record.items() for metric, values in per.items()}
    picked = CASES[case].get("metrics")
    names = ({k: v for k, v in picked.items()} if isinstance(picked, dict)
             else {k: k for k in ([picked] if isinstance(picked, str) else picked or flat)})
    rounds = len(next(iter(flat.values())))
    return [{k: flat[v][min(i, rounds - 1)] for k, v in names.items()} for i in range(rows)]  # (the end: again)


def _close(a: Any, b: Any) -> bool:
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_close(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(_close(x, y) for x, y in zip(a, b))
    return isinstance(a, float | int) and isinstance(b, float | int) and math.isclose(a, b, rel_tol=1e-12)


@pytest.fixture(scope="module")
def grid(tmp_path_factory: pytest.TempPathFactory) -> Any:
    return Tuner(train, param_space={"case": grid_search(list(CASES))},
                 run_config=RunConfig(storage=str(tmp_path_factory.mktemp("gbdt")), name="gb", system="simple",
                                      verbose=0)).fit()


@pytest.mark.parametrize("case", list(CASES))
def test_reports_and_checkpoints_as_ray(grid: Any, case: str) -> None:
    result = next(r for r in grid if r.config["case"] == case)
    if isinstance(RAY[case], str):  # xgb.cv run to its end: its booster cannot be saved, in Ray too
        assert RAY[case] in str(result.error)
        return
    rows, checkpointed, keys, files, model = RAY[case]
    history = result.metrics_history
    assert result.error is None and len(history) == rows
    assert [h["training_iteration"] for h in history if h.get("checkpoint_dir_name")] == checkpointed
    assert sorted(k for k in history[0] if k in keys or "-" in k or k in ("loss", "err")) == keys
    got = [{k: h[k] for k in keys} for h in history]
    assert _close(got, _expected_values(case, rows)), (got, _expected_values(case, rows))
    assert [sorted(os.listdir(c.path)) for c, _ in result.best_checkpoints] == [files] * len(checkpointed)
    if model is None:
        assert result.checkpoint is None
        return
    cb = axg.TuneReportCheckpointCallback if case.startswith("x") else alg.TuneReportCheckpointCallback
    fn = CASES[case].get("filename")
    try:
        booster = cb.get_model(result.checkpoint, **({"filename": fn} if fn else {}))
    except Exception as exc:  # (lightgbm.cv's CVBooster saves a file a Booster cannot load, in Ray too)
        assert model == f"raised {type(exc).__name__}"
        return
    rounds = booster.num_boosted_rounds() if case.startswith("x") else booster.current_iteration()
    assert f"{type(booster).__name__}:{rounds}" == model


def test_a_missing_metric_and_the_removed_callback_fail_as_in_ray() -> None:
    for mod in (axg, alg):
        with pytest.raises(DeprecationWarning, match="TuneReportCallback` is deprecated"):
            mod.TuneReportCallback(metrics="x")
        assert issubclass(mod.RayTrainReportCallback, mod.TuneReportCheckpointCallback)
    with pytest.raises(KeyError, match="nope"):  # outside a trial the pick fails first, as in Ray
        axg.TuneReportCheckpointCallback(metrics="nope")._report_dict(
            __import__("collections").OrderedDict(test={"logloss": [0.5]}))


def test_the_module_names_the_extra_when_the_library_is_missing(tmp_path: Any) -> None:
    import subprocess
    import sys

    (tmp_path / "xgboost").mkdir()
    (tmp_path / "xgboost" / "__init__.py").write_text("raise ImportError('no xgboost here')\n")
    out = subprocess.run([sys.executable, "-c", "import actors.integration.xgboost"], capture_output=True,
                         text=True, env={**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{os.getcwd()}"})
    assert out.returncode == 1
    assert "ImportError: actors.integration.xgboost needs the xgboost package: pip install 'audition[xgboost]'" \
        in out.stderr
