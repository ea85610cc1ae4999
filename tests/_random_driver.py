"""A driver that seeds and uses numpy's, Python's and torch's global random streams, then runs the cases
of ``tests/data/ray_random_streams.json`` under audition with the recorder's own code
(``benchmarks/ray_oracle/record_random_streams.py``, ``run_cases``). Prints one JSON line: the cases.

    python tests/_random_driver.py STORAGE_DIR
"""

from __future__ import annotations

import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "benchmarks", "ray_oracle"))

from record_random_streams import run_cases

import actors

if __name__ == "__main__":
    print(json.dumps(run_cases(actors, sys.argv[1])))
