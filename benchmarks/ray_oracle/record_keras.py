"""Record Ray Tune 2.60's Keras callback (the oracle for ``tests/data/ray_keras.json``):
``ray.tune.integration.keras.TuneReportCheckpointCallback`` inside a trainable reports Keras's ``logs`` (all, or
those ``metrics`` names, renamed by a dict) at the hooks ``report_metrics_on`` names, and at those
``checkpoint_on`` names with a checkpoint holding ``model.keras`` (``model.save``) and the metadata
``{"_model_filename": "model.keras"}``; an unknown hook raises ``ValueError``; ``TuneReportCallback`` raises
``DeprecationWarning``.

Run with a Python that has Ray and TensorFlow installed, never audition's environment::

    /work/rayvenv/bin/python benchmarks/ray_oracle/record_keras.py tests/data/ray_keras.json

``tests/test_integration_keras.py`` runs the same trainables under audition and compares.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from typing import Any

from _reported import reported_values  # (this directory's)

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

CASES: dict[str, dict[str, Any]] = {
    "defaults": {},
    "renamed": {"metrics": {"l": "val_loss"}},
    "checkpoint_at_train_end": {"metrics": "loss", "checkpoint_on": "train_end"},
    "no_checkpoints": {"metrics": ["loss", "val_loss"], "checkpoint_on": []},
}


def fit_with(callback: Any, lr: float) -> None:
    """Three epochs of a linear model with ``callback`` (inside a trial; seeded, deterministic on the CPU)."""
    import keras
    import numpy as np
    import tensorflow as tf

    keras.utils.set_random_seed(0)
    tf.config.experimental.enable_op_determinism()
    rng = np.random.default_rng(0)
    x = rng.standard_normal((64, 3)).astype("float32")
    y = (x @ np.array([[1.0], [-2.0], [0.5]], dtype="float32") + 0.1 * rng.standard_normal((64, 1))).astype("float32")
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
    model.compile(optimizer=keras.optimizers.SGD(learning_rate=lr), loss="mse")
    model.fit(x[:48], y[:48], validation_data=(x[48:], y[48:]), epochs=3, batch_size=16, verbose=0,
              callbacks=[callback], shuffle=False)


def saved_weights(path: str) -> list[Any]:
    """The shapes of the layers' weights in a ``.keras`` file (a zip holding ``model.weights.h5``), read without
    TensorFlow: a process that has run TensorFlow must not fork trial processes (they hang in its thread pools)."""
    import io
    import zipfile

    import h5py

    shapes: list[Any] = []
    with zipfile.ZipFile(path) as archive, archive.open("model.weights.h5") as f:
        weights = h5py.File(io.BytesIO(f.read()), "r")
        weights.visititems(lambda name, item: shapes.append([name, list(item.shape)])
                           if isinstance(item, h5py.Dataset) and name.startswith("layers/") else None)
    return shapes


def rows(grid: Any) -> list[Any]:
    """Each trial's reported keys and values (rounded), its checkpoint's files, metadata and saved weights."""
    out = []
    for r in sorted(grid, key=lambda r: r.config["lr"]):
        history = r.metrics_dataframe
        reported, values = reported_values(history)
        files, metadata, weights = None, None, None
        if r.checkpoint is not None:
            metadata = r.checkpoint.get_metadata()
            with r.checkpoint.as_directory() as d:
                files = sorted(os.listdir(d))
                weights = saved_weights(os.path.join(d, metadata["_model_filename"]))
        out.append({"lr": r.config["lr"], "results": len(history), "reported": reported, "values": values,
                    "files": files, "metadata": metadata, "weights": weights, "kept": len(r.best_checkpoints),
                    "error": r.error is not None})
    return out


def main() -> None:
    import ray
    import tensorflow as tf
    from ray import tune
    from ray.tune.integration.keras import TuneReportCallback, TuneReportCheckpointCallback

    out: dict[str, Any] = {"ray": ray.__version__, "tensorflow": tf.__version__}
    for case in CASES:
        def train(config: dict[str, Any], case: str = case) -> None:
            fit_with(TuneReportCheckpointCallback(**CASES[case]), config["lr"])

        grid = tune.Tuner(train, param_space={"lr": tune.grid_search([0.05, 0.1])},
                          run_config=tune.RunConfig(storage_path=tempfile.mkdtemp(), verbose=0)).fit()
        out[case] = rows(grid)
    for name, make in (("bad_hook", lambda: TuneReportCheckpointCallback(report_metrics_on="nope")),
                       ("report_callback", lambda: TuneReportCallback())):
        try:
            make()
            out[name] = "accepted"
        except Exception as exc:
            out[name] = [type(exc).__name__, str(exc)]
    with open(sys.argv[1], "w") as f:
        json.dump(out, f, indent=1, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main()
