"""Runs the cases of ``tests/data/ray_init_resources.json`` under audition with the recorder's own code
(``benchmarks/ray_oracle/record_init_resources.py``): each case's ``init(...)``, its sleeping trials, then
``shutdown()``; and what ``init`` raises where Ray's raised. Prints one JSON line.

    python tests/_init_driver.py STORAGE_DIR
"""

from __future__ import annotations

import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "benchmarks", "ray_oracle"))

from record_init_resources import CASES, init_errors, run_case

import actors


def main() -> None:
    storage = sys.argv[1]
    out: dict[str, object] = {"runs": {}}
    for name, init, resources, trials in CASES:
        actors.init(**init)
        out["runs"][name] = run_case(actors, resources, trials, os.path.join(storage, name))  # type: ignore[index]
        actors.shutdown()
    out.update(init_errors(actors.init, actors.shutdown))
    print(json.dumps(out))


if __name__ == "__main__":
    main()
