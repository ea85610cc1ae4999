"""A driver that trains a Keras model before ``fit()``, then tunes one (tests/test_fresh_start.py).

Forked from this process, a trial's first ``tf.function`` waited forever on TensorFlow's thread pools
(the run hung); prints one JSON line with the trials' losses once ``fit()`` returns.
"""

from __future__ import annotations

import json
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np
import tensorflow as tf

from actors import RunConfig, TuneConfig, Tuner, report


def build(lr: float) -> tf.keras.Model:
    model = tf.keras.Sequential([tf.keras.Input((4,)), tf.keras.layers.Dense(1)])
    model.compile(optimizer=tf.keras.optimizers.SGD(lr), loss="mse")
    return model


def data() -> tuple[np.ndarray, np.ndarray]:
    x = np.random.default_rng(0).random((32, 4), dtype=np.float32)
    return x, x.sum(axis=1, keepdims=True)


def train(config: dict) -> None:
    x, y = data()
    history = build(config["lr"]).fit(x, y, epochs=2, verbose=0)
    for loss in history.history["loss"]:
        report({"loss": float(loss)})


if __name__ == "__main__":
    build(0.1).fit(*data(), epochs=1, verbose=0)  # TensorFlow runs here first
    grid = Tuner(train, param_space={"lr": 0.05}, tune_config=TuneConfig(metric="loss", mode="min"),
                 run_config=RunConfig(storage_path=sys.argv[1], name="tf", verbose=0)).fit()
    print(json.dumps({"errors": [str(e) for e in grid.errors],
                      "iterations": [r.metrics["training_iteration"] for r in grid],
                      "losses": [r.metrics["loss"] for r in grid]}), flush=True)
