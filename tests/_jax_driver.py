"""A driver that computes with JAX before ``fit()``, then tunes a trainable that does (tests/test_fresh_start.py).

Forked from this process, a trial's first jitted product waited forever on JAX's thread pools (the run
hung); prints one JSON line with the trials' results once ``fit()`` returns.
"""

from __future__ import annotations

import json
import sys

import jax
import jax.numpy as jnp

from actors import RunConfig, Tuner, report


def train(config: dict) -> None:
    x = jnp.ones((200, 200)) * config["a"]
    product = jax.jit(lambda m: m @ m)
    for _ in range(2):
        report({"total": float(product(x).sum())})


if __name__ == "__main__":
    print(float((jnp.ones((300, 300)) @ jnp.ones((300, 300))).sum()) > 0, file=sys.stderr)  # JAX runs here first
    grid = Tuner(train, param_space={"a": 0.5},
                 run_config=RunConfig(storage_path=sys.argv[1], name="jax", verbose=0)).fit()
    print(json.dumps({"errors": [str(e) for e in grid.errors],
                      "iterations": [r.metrics["training_iteration"] for r in grid],
                      "totals": [r.metrics["total"] for r in grid]}), flush=True)
