"""A driver whose experiment never returns control: ``python tests/_runaway_driver.py MARKER STORAGE``.

Its searcher (run in-process, ``system="simple"``, so inside the driver's Thespian call) writes ``MARKER``
and then spins forever, as a runaway engine or plugin would: the test's SIGTERMs must still end it.
"""

from __future__ import annotations

import os
import sys
from typing import Any

if __name__ == "__main__":  # run as a script: make the checkout importable
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from actors import RunConfig, TuneConfig, Tuner, report
from actors.search import Searcher


class Spinning(Searcher):
    def suggest(self, trial_id: str) -> dict[str, Any] | None:
        open(sys.argv[1], "w").close()
        while True:
            pass

    def on_trial_complete(self, trial_id: str, result: dict[str, Any] | None = None, error: bool = False) -> None:
        pass


def train(config: dict[str, Any]) -> None:
    report({"loss": 1.0})


if __name__ == "__main__":
    Tuner(train, tune_config=TuneConfig(search_alg=Spinning(metric="loss", mode="min")),
          run_config=RunConfig(storage_path=sys.argv[2], verbose=0, system="simple")).fit()
