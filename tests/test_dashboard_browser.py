"""``audition dashboard`` in a real headless Chromium against experiments written by real ``fit()`` runs.

The page is driven as a person would use it: the table must show every trial, a curve one point per
reported result (counted in the SVG Plotly drew), each pause mark where the pause happened, and the
page must follow a running multi-process experiment without being reloaded. Screenshots go to the
test's directory, or to ``$AUDITION_SCREENSHOTS`` (``docs/images`` refreshes the docs' pictures).
"""

from __future__ import annotations

import os
import threading
import time

import pytest

pytest.importorskip("starlette", reason="the dashboard extra is not installed (pip install -e '.[test]')")

from actors import RunConfig, TuneConfig, Tuner
from actors._dashboard.app import create_app
from actors._dashboard.serve import Background
from actors._dashboard.source import open_catalog
from actors.search import grid_search
from tests._dashboard import (
    PAUSE_AT,
    STEPS,
    chromium_page,
    fit_experiment,
    fit_with_error,
    gated,
    screenshot,
)

POLL_MS = 300  # the page's poll interval in these tests (the command's default is 1.5 s)


@pytest.fixture
def serve():
    """serve(url) -> the base URL of a dashboard in a thread; every server is stopped at the end."""
    servers: list[Background] = []

    def start(url: str) -> str:
        server = Background(create_app(open_catalog(url), poll_ms=POLL_MS)).start()
        servers.append(server)
        return server.url

    yield start
    for s in servers:
        s.stop()


def _rows(page):
    return page.eval_on_selector_all("#trial-table tbody tr", "rs => rs.map(r => [r.dataset.trial, r.dataset.status, "
                                     "r.querySelector('.iter').textContent])")


@pytest.mark.slow
def test_table_curves_and_pause_marks_in_chromium(tmp_path, serve):
    root = str(tmp_path / "results")
    exp = fit_experiment(root)
    fit_with_error(root)
    base = serve(exp)
    with chromium_page() as page:
        page.goto(base)
        page.wait_for_function("document.querySelectorAll('#trial-table tbody tr').length === 4")
        rows = _rows(page)
        assert len({r[0] for r in rows}) == 4 and all(r[1:] == ["TERMINATED", str(STEPS)] for r in rows)
        screenshot(page, "dashboard-table", str(tmp_path))

        page.click("#tab-curves")
        page.wait_for_function("((document.getElementById('curves') || {}).data || []).length >= 5")
        drawn = page.evaluate("""() => {
            const gd = document.getElementById('curves');
            const layers = [...gd.querySelectorAll('.scatterlayer .trace')];
            return gd.data.map((t, i) => ({meta: t.meta, x: t.x, y: t.y,
                                           points: layers[i].querySelectorAll('path.point').length}));
        }""")
        curves = [t for t in drawn if not str(t["meta"]).startswith("mark:")]
        assert len(curves) == 4
        for t in curves:  # one drawn point per reported result
            assert t["x"] == list(range(1, STEPS + 1)) and t["points"] == STEPS, t
        pauses = next(t for t in drawn if t["meta"] == "mark:pause")
        assert pauses["points"] == 4 and pauses["x"] == [PAUSE_AT] * 4  # every trial paused at PAUSE_AT
        at_pause = sorted(t["y"][PAUSE_AT - 1] for t in curves)
        assert sorted(pauses["y"]) == at_pause  # each mark sits on its own curve's point
        screenshot(page, "dashboard-curves", str(tmp_path))

        page.click("#tab-best")
        page.wait_for_function("((document.getElementById('best') || {}).data || []).length === 1")
        screenshot(page, "dashboard-best", str(tmp_path))
        page.click("#tab-parallel")
        page.wait_for_function("document.querySelectorAll('#parallel .parcoords .y-axis').length === 3")
        screenshot(page, "dashboard-parallel", str(tmp_path))

        page.click("#tab-trials")
        page.wait_for_selector("#trial-table tbody tr")
        page.click("#trial-table tbody tr:first-child a")
        page.wait_for_function(f"document.querySelectorAll('#trial-checkpoints tbody tr').length === {STEPS}")
        assert f"pause at iteration {PAUSE_AT}" in page.text_content("#trial-marks")
        assert f"step {STEPS - 1}" in page.text_content("#trial-stdout")
        screenshot(page, "dashboard-trial", str(tmp_path))

        page.goto(serve(root))  # a directory of experiments
        page.wait_for_function("document.querySelectorAll('#exp-list tbody tr').length === 2")
        screenshot(page, "dashboard-experiments", str(tmp_path))
        page.click("#exp-list a >> text=witherror")
        page.select_option("#status-filter", "ERROR")
        page.wait_for_function("""() => { const r = document.querySelectorAll('#trial-table tbody tr');
                                          return r.length === 1 && r[0].dataset.status === 'ERROR'; }""")
        page.click("#trial-table tbody tr a")
        # (60 s: under the whole suite's load the trial's files took longer than Playwright's 15 s once)
        page.wait_for_function("(document.getElementById('trial-error') || {textContent: ''})"
                               ".textContent.includes('diverged at step 3')", timeout=60_000)
        assert "Traceback" in page.text_content("#trial-error")


@pytest.mark.slow
@pytest.mark.timeout(300)  # (a loaded machine: four test workers, a browser and a multi-process run at once)
def test_the_page_follows_a_live_multiprocess_run(tmp_path, serve, no_leaks):
    storage, gate = str(tmp_path / "results"), str(tmp_path / "gate")
    tuner = Tuner(gated, param_space={"lr": grid_search([0.1, 0.2]), "steps": 4, "before": 2, "gate": gate},
                  tune_config=TuneConfig(metric="loss", mode="min"),
                  run_config=RunConfig(name="live", storage=storage, system="multiproc", verbose=0))
    done = threading.Event()
    outcome: dict = {}

    def run():
        try:
            outcome["grid"] = tuner.fit()
        except BaseException as exc:  # reported by the test, not lost in the thread
            outcome["error"] = exc
        finally:
            done.set()

    # the browser first: its start-up does not eat into the time the trials wait at their gate
    with chromium_page() as page:
        thread = threading.Thread(target=run, name="fit")
        thread.start()
        try:
            exp = os.path.join(storage, "live")
            deadline = time.monotonic() + 60
            while not os.path.exists(os.path.join(exp, "tuner.pkl")) and not done.is_set():
                assert time.monotonic() < deadline, "the run did not start within 60 s"
                done.wait(0.05)
            base = serve(exp)
            page.goto(base)
            page.evaluate("window.__sameDocument = 42")
            page.wait_for_function("""() => { const r = [...document.querySelectorAll('#trial-table tbody tr')];
                return r.length === 2 && r.every(x => x.dataset.status === 'RUNNING'
                                                 && x.querySelector('.iter').textContent === '2'); }""",
                                   timeout=90_000)
            screenshot(page, "dashboard-live", str(tmp_path))
            with open(gate, "w"):
                pass  # let the trials finish
            page.wait_for_function("""() => { const r = [...document.querySelectorAll('#trial-table tbody tr')];
                return r.length === 2 && r.every(x => x.dataset.status === 'TERMINATED'
                                                 && x.querySelector('.iter').textContent === '4'); }""",
                                   timeout=60_000)
            assert page.evaluate("window.__sameDocument") == 42  # updated in place, never reloaded
        finally:
            with open(gate, "w"):
                pass
            thread.join(120)
    assert "error" not in outcome, outcome.get("error")
