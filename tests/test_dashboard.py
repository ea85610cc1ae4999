"""``audition dashboard``: the storage reader, the view model and the JSON API (Starlette's TestClient), and the
command's bad inputs. Fast; the real-browser tests are in ``test_dashboard_browser.py``."""

from __future__ import annotations

import json
import os
import pickle
import socket

import pytest

pytest.importorskip("starlette", reason="the dashboard extra is not installed (pip install -e '.[test]')")
pytest.importorskip("httpx", reason="Starlette's TestClient needs httpx (pip install -e '.[test]')")

from starlette.testclient import TestClient

from actors._cli.main import main
from actors._dashboard import view
from actors._dashboard.access import COOKIE, dashboard_token
from actors._dashboard.app import create_app
from actors._dashboard.source import open_catalog
from actors._driver.errors import ConfigError
from storage import ExperimentLayout, StorageContext, write_experiment_state
from tests._dashboard import PAUSE_AT, STEPS, fit_experiment, fit_with_error


@pytest.fixture(scope="module")
def fitted(tmp_path_factory):
    """A real fit() (system="simple"): four trials paused once each, and one experiment with an ERROR trial."""
    root = str(tmp_path_factory.mktemp("dash") / "results")
    return {"demo": fit_experiment(root), "witherror": fit_with_error(root), "root": root}


def client(url, **kw):
    return TestClient(create_app(open_catalog(url), **kw))


def _row(tid, status="TERMINATED", it=3, loss=1.0, config=None, marks=None):
    return {"trial_id": tid, "status": status, "config": config or {"lr": 0.1, "opt": "sgd"},
            "last_result": {"training_iteration": it, "loss": loss, "time_total_s": 1.0}, "num_failures": 0,
            "error": None, "traceback": None, "checkpoint": None, "marks": marks or []}


def write_experiment(root, name, trials, histories, metric="loss", mode="min"):
    """An experiment in the on-disk format, by hand (what a run that is still going leaves)."""
    ctx = StorageContext(root)
    layout = ExperimentLayout(ctx, name)
    for tid, rows in histories.items():
        os.makedirs(os.path.join(root, name, tid), exist_ok=True)
        with open(os.path.join(root, name, tid, "result.json"), "w") as f:
            f.writelines(json.dumps(r) + "\n" for r in rows)
    write_experiment_state(ctx, layout, {"version": 1, "name": name, "metric": metric, "mode": mode,
                                         "trials": trials, "searcher": "gASVAAAA", "written_at": 1.0})
    return os.path.join(root, name)


# ---------------------------------------------------------------------------------- view model (pure)
def test_table_filters_searches_sorts_and_pages():
    trials = [_row("t0", loss=0.5), _row("t1", "RUNNING", loss=0.2), _row("t2", "ERROR", loss=float("nan")),
              _row("t3", loss=0.9, config={"lr": 0.3, "opt": "adam"}), _row("t4", "PAUSED", loss=None)]
    page = view.table(trials, "loss", sort="metric", desc=False, limit=2)
    assert page["total"] == 5 and [r["trial_id"] for r in page["rows"]] == ["t1", "t0"]
    rest = view.table(trials, "loss", sort="metric", offset=2, limit=10)["rows"]
    assert [r["trial_id"] for r in rest] == ["t3", "t2", "t4"]  # no value (NaN, missing) last
    desc = view.table(trials, "loss", sort="metric", desc=True)["rows"]
    assert [r["trial_id"] for r in desc][:3] == ["t3", "t0", "t1"] and desc[-1]["trial_id"] in ("t2", "t4")
    assert [r["trial_id"] for r in view.table(trials, "loss", statuses={"RUNNING", "PAUSED"})["rows"]] == ["t1", "t4"]
    assert [r["trial_id"] for r in view.table(trials, "loss", query="ADAM")["rows"]] == ["t3"]
    assert view.table(trials, "loss", sort="config:opt")["rows"][0]["trial_id"] == "t3"
    assert view.table(trials, "loss")["rows"][2]["metric"] == "nan"  # strict JSON


def test_downsample_keeps_ends_marks_and_spikes():
    n = 10_000
    ys = [float(i % 7) for i in range(n)]
    ys[5_001] = 1e6  # a spike a stride would skip
    picked = view.downsample(list(range(n)), ys, 200, {4_321})
    assert len(picked) <= 200 and picked[0] == 0 and picked[-1] == n - 1
    assert 4_321 in picked and 5_001 in picked and picked == sorted(set(picked))
    assert view.downsample([1.0, 2.0], [1.0, 2.0], 200) == [0, 1]


def test_curves_one_point_per_result_and_marks_on_their_iteration():
    rows = [{"training_iteration": i, "loss": 1.0 / i} for i in range(1, 7)]
    trials = {"a": _row("a", marks=[{"kind": "pause", "iteration": 3}, {"kind": "stop", "iteration": 6}]),
              "b": _row("b", "PAUSED", marks=[{"kind": "pause", "iteration": 2}])}
    out = view.curves({"a": rows, "b": rows[:2]}, trials, "loss")
    a, _ = out["traces"]
    assert a["x"] == [1, 2, 3, 4, 5, 6] and a["points"] == a["results"] == 6 and not a["downsampled"]
    assert {(m["trial_id"], m["kind"], m["iteration"]) for m in out["marks"]} == {
        ("a", "pause", 3), ("a", "stop", 6), ("b", "paused", 2)}
    pause = next(m for m in out["marks"] if m["kind"] == "pause")
    assert (pause["x"], pause["y"]) == (3, rows[2]["loss"])
    long = [{"training_iteration": i, "loss": float(i)} for i in range(1, 5001)]
    t = view.curves({"a": long}, {"a": _row("a", marks=[{"kind": "pause", "iteration": 2500}])}, "loss",
                    max_points=100)
    assert t["traces"][0]["downsampled"] and len(t["traces"][0]["x"]) <= 100 and t["marks"][0]["x"] == 2500


def test_best_so_far_and_parallel_coordinates():
    h = {"a": [{"timestamp": 10, "time_total_s": 1, "acc": 0.5}, {"timestamp": 12, "time_total_s": 3, "acc": 0.4}],
         "b": [{"timestamp": 11, "time_total_s": 1, "acc": 0.7}, {"timestamp": 13, "time_total_s": 2, "acc": 0.6}]}
    out = view.best_so_far({t: view.improvements(rows, "acc", "max") for t, rows in h.items()}, "acc", "max")
    assert out["y"] == [0.5, 0.7, 0.7] and out["x"] == [0, 1, 3] and out["n"] == [1, 2, 4]
    assert out["trial_id"] == ["a", "b", "b"]
    assert view.improvements(h["a"], "acc", "max").kept == [(10, 1, 0.5)]  # only what beat the trial's own best
    par = view.parallel([_row("t0", loss=0.5), _row("t1", loss=0.2, config={"lr": 0.3, "opt": "adam"}),
                         _row("t2", loss=float("inf"))], "loss")
    assert par["trial_ids"] == ["t0", "t1"] and par["color"] == [0.5, 0.2]
    opt = next(d for d in par["dimensions"] if d["label"] == "opt")
    assert opt["ticktext"] == ["adam", "sgd"] and opt["values"] == [1, 0]


# ---------------------------------------------------------------------------------- the API on a real fit()
def test_api_on_a_real_experiment(fitted):
    c = client(fitted["demo"])
    ov = c.get("/api/e/demo/overview").json()
    assert ov["metric"] == "loss" and ov["mode"] == "min" and ov["counts"] == {"TERMINATED": 4}
    assert ov["finished"] and "acc" in ov["metrics"] and ov["best"]["trial_id"]
    table = c.get("/api/e/demo/trials?limit=3&sort=metric").json()
    assert table["total"] == 4 and len(table["rows"]) == 3 and table["columns"] == ["lr", "opt"]
    assert all(r["iteration"] == STEPS for r in table["rows"])
    curves = c.get("/api/e/demo/curves?metric=loss").json()
    assert len(curves["traces"]) == 4 and all(len(t["x"]) == STEPS for t in curves["traces"])
    assert sorted((m["kind"], m["x"]) for m in curves["marks"]) == [("pause", PAUSE_AT)] * 4
    tid = table["rows"][0]["trial_id"]
    t = c.get(f"/api/e/demo/trial/{tid}").json()
    assert t["config"]["opt"] == "sgd" and t["marks"] == [{"kind": "pause", "iteration": PAUSE_AT}]
    assert [k["iteration"] for k in t["checkpoints"]] == list(range(1, STEPS + 1))
    assert "loss" in t["checkpoints"][-1]["metrics"] and f"step {STEPS - 1}" in t["stdout"]
    assert c.get("/api/e/demo/best").json()["results"] == 4 * STEPS
    assert len(c.get("/api/e/demo/parallel").json()["trial_ids"]) == 4
    assert c.get("/api/e/nope/overview").status_code == 404
    assert c.get("/api/e/demo/trial/nope").status_code == 404
    page = c.get("/")
    assert page.status_code == 200 and "static/app.js" in page.text and "__POLL_MS__" not in page.text
    assert "static/plotly.min.js" in c.get("/static/app.js").text  # served here, never from a CDN
    assert "://" not in page.text.replace("http://www.w3.org", "")
    js = c.get("/static/plotly.min.js")
    assert js.status_code == 200 and len(js.content) > 1_000_000  # the bundle itself, from the plotly package
    assert c.get("/static/../app.py").status_code == 404


def test_a_failed_trial_shows_its_traceback_and_stderr(fitted):
    c = client(fitted["witherror"])
    rows = c.get("/api/e/witherror/trials?status=ERROR").json()["rows"]
    assert len(rows) == 1 and "diverged" in rows[0]["error"]
    t = c.get(f"/api/e/witherror/trial/{rows[0]['trial_id']}").json()
    assert "ValueError: diverged at step 3" in t["traceback"] and "Traceback" in (t["stderr"] or "")
    assert t["marks"][-1]["kind"] == "fail"


def test_error_file_and_output_tails_when_the_state_has_no_traceback(tmp_path, monkeypatch):
    """A driver that died before its state recorded the failure: error.txt still tells it; long output is
    cut to its tail, without a torn first line."""
    import actors._dashboard.source as source

    monkeypatch.setattr(source, "TAIL_BYTES", 61)  # not on a line boundary
    row = dict(_row("t0", "RUNNING"), error=None, traceback=None)
    path = write_experiment(str(tmp_path), "died", [row], {"t0": []})
    with open(os.path.join(path, "t0", "error.txt"), "w") as f:
        f.write("ValueError: boom\n\nTraceback (most recent call last): ...")
    with open(os.path.join(path, "t0", "stdout.txt"), "w") as f:
        f.writelines(f"line {i}\n" for i in range(100))
    t = client(path).get("/api/e/died/trial/t0").json()
    assert t["traceback"].startswith("ValueError: boom") and t["stderr"] is None
    assert t["stdout"].endswith("line 99\n") and t["stdout"].startswith("line ") and len(t["stdout"]) <= 61


def test_nothing_is_unpickled(fitted, monkeypatch):
    """tuner.pkl and the state's base64 pickles are there; no endpoint may decode them."""
    import cloudpickle

    def refuse(*a, **k):
        raise AssertionError("the dashboard unpickled something")

    for mod, name in ((pickle, "loads"), (pickle, "load"), (pickle, "Unpickler"), (cloudpickle, "loads")):
        monkeypatch.setattr(mod, name, refuse)
    c = client(fitted["root"])
    for name in ("demo", "witherror"):
        tid = c.get(f"/api/e/{name}/trials").json()["rows"][0]["trial_id"]
        for path in ("overview", "trials", "curves", "best", "parallel", f"trial/{tid}"):
            assert c.get(f"/api/e/{name}/{path}").status_code == 200, path


def test_a_directory_lists_its_experiments(fitted, tmp_path):
    listing = client(fitted["root"]).get("/api/experiments").json()
    assert not listing["single"] and [e["name"] for e in listing["experiments"]] == ["demo", "witherror"]
    assert listing["experiments"][0]["counts"] == {"TERMINATED": 4}
    single = client(fitted["demo"]).get("/api/experiments").json()
    assert single["single"] and [e["name"] for e in single["experiments"]] == ["demo"]


def test_follows_a_running_experiment(tmp_path, monkeypatch):
    """New results and a new state version show on the next poll: nothing stale is served from a cache."""
    import actors._dashboard.source as source

    monkeypatch.setattr(source, "STATE_MIN_AGE_S", 0.0)
    rows = [{"training_iteration": i, "loss": 1.0 / i, "timestamp": i} for i in range(1, 3)]
    path = write_experiment(str(tmp_path), "live", [_row("t0", "RUNNING", it=2)], {"t0": rows})
    c = client(path)
    assert len(c.get("/api/e/live/curves").json()["traces"][0]["x"]) == 2
    with open(os.path.join(path, "t0", "result.json"), "a") as f:
        f.write(json.dumps({"training_iteration": 3, "loss": 0.3, "timestamp": 3}) + "\n")
    assert c.get("/api/e/live/curves").json()["traces"][0]["x"] == [1, 2, 3]
    write_experiment(str(tmp_path), "live", [_row("t0", "TERMINATED", it=3), _row("t1", "PENDING")],
                     {"t0": [*rows, {"training_iteration": 3, "loss": 0.3, "timestamp": 3}]})
    assert c.get("/api/e/live/overview").json()["counts"] == {"PENDING": 1, "TERMINATED": 1}


def test_memory_storage(tmp_path):
    ctx = StorageContext("memory://dashtest")
    layout = ExperimentLayout(ctx, "m")
    ctx.fs.pipe(layout.result_file("t0"), b'{"training_iteration": 1, "loss": 2.0}\n')
    write_experiment_state(ctx, layout, {"trials": [_row("t0", it=1, loss=2.0)], "metric": "loss", "mode": "min"})
    c = client("memory://dashtest/m")
    assert c.get("/api/e/m/curves").json()["traces"][0]["y"] == [2.0]


# ---------------------------------------------------------------------------------- access
def test_beyond_loopback_every_request_needs_the_token(fitted):
    token = dashboard_token(b"k" * 32)
    c = client(fitted["demo"], token=token)
    denied = c.get("/api/e/demo/overview")
    assert denied.status_code == 401 and "no token" in denied.text
    assert c.get("/api/e/demo/overview", headers={"X-Audition-Token": "bad"}).status_code == 401
    assert c.get("/api/e/demo/overview", headers={"X-Audition-Token": token}).status_code == 200
    assert c.get("/api/e/demo/overview", headers={"Authorization": f"Bearer {token}"}).status_code == 200
    page = c.get(f"/?token={token}")
    assert page.status_code == 200 and COOKIE in page.headers["set-cookie"]
    assert c.get("/static/app.js").status_code == 200  # the cookie the page got opens the rest
    c.cookies.clear()
    assert c.get("/static/app.js").status_code == 401


def test_command_refuses_bad_inputs_in_one_line(fitted, tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("AUDITION_CLUSTER_KEY", raising=False)
    monkeypatch.delenv("AUDITION_CLUSTER_KEY_FILE", raising=False)
    (tmp_path / "empty").mkdir()

    def refused(*argv):
        assert main(["dashboard", *argv]) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith("audition dashboard: ") and "\n" not in err and "Traceback" not in err
        return err

    assert "empty directory" in refused(str(tmp_path / "empty"))
    assert "no such directory" in refused(str(tmp_path / "missing"))
    trial = next(d for d in os.listdir(fitted["demo"]) if os.path.isdir(os.path.join(fitted["demo"], d))
                 and not d.startswith("."))
    assert "one trial's directory" in refused(os.path.join(fitted["demo"], trial))
    assert "needs the cluster key" in refused(fitted["demo"], "--host", "0.0.0.0")
    monkeypatch.setenv("AUDITION_CLUSTER_KEY", "short")
    assert "use at least 16" in refused(fitted["demo"], "--host", "0.0.0.0")
    monkeypatch.delenv("AUDITION_CLUSTER_KEY")
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        assert "is in use" in refused(fitted["demo"], "--port", str(busy.getsockname()[1]))


def test_open_catalog_names_what_is_there(fitted, tmp_path):
    assert open_catalog(fitted["demo"]).single
    assert not open_catalog(fitted["root"]).single
    (tmp_path / "junk" / "sub").mkdir(parents=True)
    with pytest.raises(ConfigError, match="not an audition experiment"):
        open_catalog(str(tmp_path / "junk"))


def test_s3_experiment_and_directory(s3_location, monkeypatch):
    """On an object store: the directory listing, a history, and new results once the state says so."""
    import actors._dashboard.source as source
    from storage import write_bytes

    monkeypatch.setattr(source, "STATE_MIN_AGE_S", 0.0)
    url, options = s3_location
    ctx = StorageContext(url, options)
    layout = ExperimentLayout(ctx, "exp")

    def save(rows, status):
        write_bytes(ctx, layout.result_file("t0"), "".join(json.dumps(r) + "\n" for r in rows).encode())
        write_experiment_state(ctx, layout, {"trials": [_row("t0", status, it=len(rows), loss=rows[-1]["loss"])],
                                             "metric": "loss", "mode": "min"})

    rows = [{"training_iteration": 1, "loss": 1.0}]
    save(rows, "RUNNING")
    listing = TestClient(create_app(open_catalog(url, options))).get("/api/experiments").json()
    assert [e["name"] for e in listing["experiments"]] == ["exp"]
    c = TestClient(create_app(open_catalog(f"{url}/exp", options)))
    assert c.get("/api/e/exp/curves").json()["traces"][0]["y"] == [1.0]
    save([*rows, {"training_iteration": 2, "loss": 0.5}], "TERMINATED")
    assert c.get("/api/e/exp/curves").json()["traces"][0]["y"] == [1.0, 0.5]
