"""The suite's collection imports none of the heavy libraries (tests/_lean.py says why: each pytest-xdist worker
collects every module, then forks actor processes from what it holds)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from tests._lean import HEAVY

HERE = os.path.dirname(os.path.abspath(__file__))
_COLLECT = """
import json, sys
import pytest
code = pytest.main(["--collect-only", "-q", "-p", "no:cacheprovider", sys.argv[1]])
print(json.dumps({"code": int(code), "loaded": sorted({m.split(".")[0] for m in sys.modules} & set(sys.argv[2:]))}))
"""


def test_collection_stays_lean() -> None:
    done = subprocess.run([sys.executable, "-c", _COLLECT, HERE, *HEAVY], capture_output=True, text=True,
                          timeout=240, cwd=os.path.dirname(HERE))
    last = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""
    assert last.startswith("{"), done.stdout[-3000:] + done.stderr[-3000:]
    out = json.loads(last)
    assert out["code"] == 0, done.stdout[-3000:]
    assert out["loaded"] == [], (
        f"collecting the suite imported {out['loaded']}: a test module imports it at its top (importorskip or "
        f"import); use tests._lean.needs / lazy, or import it inside the tests")
