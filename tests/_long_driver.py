"""A driver that runs a long experiment; the hygiene tests interrupt or kill it."""

from __future__ import annotations

import sys
import time

from actors import RunConfig, TuneConfig, Tuner, report


def train(config: dict) -> None:
    for i in range(10_000):
        time.sleep(0.01)
        report({"loss": 1.0 / (i + 1)})


if __name__ == "__main__":
    storage = sys.argv[1]
    try:
        Tuner(train, tune_config=TuneConfig(num_samples=2),
              run_config=RunConfig(name="long", storage=storage, verbose=0)).fit()
    except KeyboardInterrupt:  # SIGTERM (Ctrl-C ends the run and fit() returns, as Ray)
        print("interrupted", flush=True)
        sys.exit(130)
    print("fit returned", flush=True)
