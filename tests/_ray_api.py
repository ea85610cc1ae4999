"""Ray Tune 2.60's API facts recorded by ``benchmarks/ray_oracle/record_api_semantics.py``."""

from __future__ import annotations

import json
import os
from typing import Any

with open(os.path.join(os.path.dirname(__file__), "data", "ray_api_semantics.json")) as _f:
    RAY_API: dict[str, Any] = json.load(_f)

__all__ = ["RAY_API"]
