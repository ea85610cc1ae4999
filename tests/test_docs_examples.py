"""Every ```python block of the user guide and of "Coming from Ray Tune" runs as a script.

Each block is written to a file and run in a fresh interpreter, with its ``/tmp/...`` storage paths moved
under ``tmp_path``.  A block preceded by ``<!-- no-run -->`` is a fragment and is skipped.  Every process the
script starts (actor systems included) carries a marker in its environment, so a leak is found even though
Thespian's admin daemonizes.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
import uuid

import psutil
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOCS = ("user-guide.md", "coming-from-ray.md", "testing.md")
NO_RUN = "<!-- no-run -->"
_FENCE = re.compile(r"^```python[ \t]*\n(.*?)^```[ \t]*$", re.DOTALL | re.MULTILINE)
_MARKER = "AUDITION_DOCS_EXAMPLE"


def _blocks(name: str) -> list[tuple[int, str, bool]]:
    """``(index, code, runnable)`` for every python block of ``docs/<name>``."""
    with open(os.path.join(ROOT, "docs", name), encoding="utf-8") as f:
        text = f.read()
    out = []
    for i, m in enumerate(_FENCE.finditer(text)):
        before = text[: m.start()].rstrip().splitlines()
        out.append((i, m.group(1), not before or before[-1].strip() != NO_RUN))
    return out


CASES = [pytest.param(name, i, code, runnable, id=f"{name.removesuffix('.md')}-{i}")
         for name in DOCS for i, code, runnable in _blocks(name)]


def _marked(token: str) -> list[psutil.Process]:
    out = []
    for p in psutil.process_iter(["pid", "status"]):
        try:
            if p.info["status"] != psutil.STATUS_ZOMBIE and p.environ().get(_MARKER) == token:
                out.append(p)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess, OSError):
            continue
    return out


def test_every_doc_has_runnable_blocks():
    for name in DOCS:
        assert any(runnable for _, _, runnable in _blocks(name)), f"docs/{name} has no runnable python block"


@pytest.mark.slow
@pytest.mark.timeout(150)
@pytest.mark.parametrize(("doc", "index", "code", "runnable"), CASES)
def test_doc_example_runs(doc, index, code, runnable, tmp_path):
    if not runnable:
        pytest.skip(f"marked {NO_RUN} in docs/{doc}")
    storage = tmp_path / "storage"
    storage.mkdir()
    code = code.replace('"/tmp/', f'"{storage}/').replace("'/tmp/", f"'{storage}/")
    assert "/tmp/" not in code.replace(str(tmp_path), ""), "a /tmp path the rewrite missed"
    script = tmp_path / f"doc_example_{index}.py"
    script.write_text(code, encoding="utf-8")
    token = uuid.uuid4().hex
    env = dict(os.environ, PYTHONPATH=ROOT, **{_MARKER: token})
    env.pop("PYTEST_CURRENT_TEST", None)
    res = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, cwd=str(tmp_path),
                         env=env, timeout=120)
    assert res.returncode == 0, (f"docs/{doc} python block #{index} exited {res.returncode}\n"
                                 f"--- stdout ---\n{res.stdout[-2000:]}\n--- stderr ---\n{res.stderr[-6000:]}")
    deadline = time.monotonic() + 20.0  # a loaded 2-core box shuts actor systems down slowly
    left = _marked(token)
    while left and time.monotonic() < deadline:
        psutil.wait_procs(left, timeout=0.5)
        left = _marked(token)
    for p in left:
        try:
            p.kill()
        except psutil.NoSuchProcess:
            pass
    assert not left, f"docs/{doc} python block #{index} left processes running: {[p.pid for p in left]}"
