"""``audition status | plot | resume``: real experiments read back through the command line.

Experiments run in this process with ``system="simple"`` (fast, no actor processes); the CLI runs as
``python -m actors._cli`` in a subprocess, exactly as a user would call it.
"""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
from typing import Any

import cloudpickle
import pytest

from actors import Checkpoint, RunConfig, TuneConfig, Tuner, get_checkpoint, report
from actors._cli.inspect import open_experiment
from actors._cli.plot import trial_events
from actors._engine.marks import Mark, MarkKind
from actors.schedulers import ASHAScheduler, PopulationBasedTraining
from actors.search import grid_search
from tests import _trainables as T

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def healing(config: dict[str, Any]) -> None:
    """Crashes after checkpointing step 1 when ``fail`` is set, until the "fix" (an env var) is deployed."""
    ckpt = get_checkpoint()
    start = ckpt.to_dict()["step"] + 1 if ckpt else 0
    for step in range(start, 4):
        report({"loss": config["x"] / (step + 1), "restored_from": start - 1},
               checkpoint=Checkpoint.from_dict({"step": step}))
        if step == 1 and config["fail"] and not os.environ.get("AUDITION_TEST_HEALED"):
            raise ValueError("broken until healed")


def cli(*args: str, env: dict[str, str] | None = None, pythonpath: str = "", timeout: float = 120,
        cwd: str | None = None) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "AUDITION_CLUSTER_KEY"))}
    full["PYTHONPATH"] = os.pathsep.join(p for p in (pythonpath, ROOT) if p)
    full.update(env or {})
    return subprocess.run([sys.executable, "-m", "actors._cli", *args], capture_output=True, text=True,
                          env=full, timeout=timeout, cwd=cwd or ROOT)


def bad(res: subprocess.CompletedProcess[str], verb: str, *needles: str) -> str:
    """A clear one-line-per-problem error: the verb's prefix, exit 2, no traceback."""
    assert res.returncode == 2, (res.returncode, res.stdout, res.stderr)
    assert res.stderr.startswith(f"audition {verb}: "), res.stderr
    assert "Traceback" not in res.stderr, res.stderr
    for needle in needles:
        assert needle in res.stderr, (needle, res.stderr)
    return res.stderr


def run_experiment(storage: str, name: str, options: dict[str, Any] | None = None) -> str:
    """Two trials, one of which ends in ERROR; returns the experiment path."""
    grid = Tuner(
        healing,
        param_space={"x": 1.0, "fail": grid_search([False, True])},
        tune_config=TuneConfig(metric="loss", mode="min"),
        run_config=RunConfig(name=name, storage=storage, storage_options=options, system="simple", verbose=0),
    ).fit()
    assert sorted(r.status.value for r in grid) == ["ERROR", "TERMINATED"]
    return grid.experiment_path


@pytest.fixture(scope="module")
def experiment(tmp_path_factory: pytest.TempPathFactory) -> str:
    return run_experiment(str(tmp_path_factory.mktemp("cli") / "results"), "exp")


# ---------------------------------------------------------------------------------- status
def test_status_text(experiment):
    res = cli("status", experiment)
    assert res.returncode == 0, res.stderr
    out = res.stdout
    assert f"experiment exp at {experiment}" in out
    assert "trainable healing, metric loss (min)" in out
    assert "2 trials: 1 ERROR, 1 TERMINATED" in out
    assert "best trial " in out and "loss=0.25 at iteration 4" in out
    assert "errors:" in out and "ValueError: broken until healed" in out
    rows = [line for line in out.splitlines() if line.endswith(("x=1, fail=False", "x=1, fail=True"))
            and not line.startswith("best")]
    assert len(rows) == 2 and "TERMINATED" in rows[0] and "ERROR" in rows[1]


def test_status_json(experiment):
    res = cli("status", experiment, "--json")
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert (doc["experiment"], doc["path"], doc["metric"], doc["mode"]) == ("exp", experiment, "loss", "min")
    assert doc["counts"] == {"ERROR": 1, "TERMINATED": 1} and doc["num_trials"] == 2
    by_status = {t["status"]: t for t in doc["trials"]}
    assert doc["best"]["trial_id"] == by_status["TERMINATED"]["trial_id"] and doc["best"]["value"] == 0.25
    assert by_status["ERROR"]["error"] == "ValueError: broken until healed"
    assert by_status["ERROR"]["last_result"]["training_iteration"] == 2
    assert by_status["ERROR"]["checkpoint_iteration"] == 2
    for t in doc["trials"]:  # the trial's directory (named as Ray names it): its files are there
        assert os.path.basename(t["path"]).startswith(f"healing_{t['trial_id']}_"), t["path"]
        assert os.path.isfile(os.path.join(t["path"], "result.json")), t["path"]


def test_status_metric_and_mode_override(experiment):
    doc = json.loads(cli("status", experiment, "--json", "--metric", "loss", "--mode", "max").stdout)
    errored = next(t for t in doc["trials"] if t["status"] == "ERROR")
    assert doc["mode"] == "max" and doc["best"]["trial_id"] == errored["trial_id"]
    bad(cli("status", experiment, "--metric", "acc", "--mode", "max"), "status",
        "no trial of exp reported the metric 'acc'", "'loss'")
    bad(cli("status", experiment, "--metric", "restored_from"), "status", "needs --mode")


@pytest.mark.slow
def test_status_on_s3_with_options_and_with_the_environment(s3_location):
    url, options = s3_location
    path = run_experiment(url, "s3exp", options)
    res = cli("status", path, "--storage-options", json.dumps(options), "--json")
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert doc["path"] == f"{url}/s3exp" and doc["counts"] == {"ERROR": 1, "TERMINATED": 1}
    endpoint_only = json.dumps({"client_kwargs": options["client_kwargs"]})
    env = {"AWS_ACCESS_KEY_ID": options["key"], "AWS_SECRET_ACCESS_KEY": options["secret"]}
    res = cli("status", path, "--storage-options", endpoint_only, env=env)
    assert res.returncode == 0, res.stderr
    assert "2 trials: 1 ERROR, 1 TERMINATED" in res.stdout
    bad(cli("status", f"{url}/nothing-here", "--storage-options", endpoint_only, env=env), "status",
        f"{url}/nothing-here is empty")
    bad(cli("status", url, "--storage-options", endpoint_only, env=env), "status",
        "is a storage root holding experiments (s3exp)")
    bad(cli("status", "s3://only-a-bucket"), "status", "names a bucket or storage root")


@pytest.mark.slow
def test_plot_and_resume_on_s3(s3_location, tmp_path):
    url, options = s3_location
    path = run_experiment(url, "s3plot", options)
    opts = json.dumps(options)
    out = tmp_path / "s3.png"
    res = cli("plot", path, "--metric", "loss", "--out", str(out), "--storage-options", opts)
    assert res.returncode == 0, res.stderr
    assert out.read_bytes()[:8] == PNG_SIGNATURE and "2 trials (1 in ERROR)" in res.stdout
    res = cli("resume", path, "--trainable", "tests.test_cli:healing", "--resume-errored", "--json",
              "--storage-options", opts, env={"AUDITION_TEST_HEALED": "1"})
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["counts"] == {"TERMINATED": 2}
    res = cli("status", path, "--storage-options", opts, "--json")
    assert res.returncode == 0 and json.loads(res.stdout)["counts"] == {"TERMINATED": 2}, res.stderr


# ---------------------------------------------------------------------------------- plot
def test_plot_writes_a_readable_png(experiment, tmp_path):
    out = tmp_path / "curves.png"
    res = cli("plot", experiment, "--metric", "loss", "--out", str(out))
    assert res.returncode == 0, res.stderr
    assert f"wrote {out}: 2 trials (1 in ERROR)" in res.stdout
    data = out.read_bytes()
    assert data[:8] == PNG_SIGNATURE
    from PIL import Image

    with Image.open(out) as img:
        img.verify()
    with Image.open(out) as img:
        assert img.format == "PNG" and img.size == (1000, 600)
    import matplotlib.image

    assert matplotlib.image.imread(str(out)).shape[:2] == (600, 1000)


def _fit_marked(storage: str, name: str, scheduler: Any) -> None:
    Tuner(T.fn_trainable, param_space={"x": grid_search([1.0, 3.0, 5.0, 6.0]), "steps": 12},
          tune_config=TuneConfig(metric="loss", mode="min", scheduler=scheduler),
          run_config=RunConfig(name=name, storage=storage, system="simple", verbose=0)).fit()


@pytest.mark.slow
def test_plot_marks_recorded_exploits_stops_and_pauses(tmp_path):
    """The engine records each decision as it takes effect; inspect reads the record and plot draws it."""
    storage = str(tmp_path / "results")
    pbt = PopulationBasedTraining(time_attr="training_iteration", perturbation_interval=3, quantile_fraction=0.25,
                                  hyperparam_mutations={"x": [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]},
                                  resample_probability=0.0, seed=0)
    _fit_marked(storage, "pbt", pbt)
    _fit_marked(storage, "asha", ASHAScheduler(max_t=12, grace_period=2, reduction_factor=2))
    _fit_marked(storage, "pause", T.PauseFromHook(at=2))

    exp = open_experiment(f"{storage}/pbt")
    marks, histories = exp.marks(), exp.histories()
    # async PBT clones the bottom trials and pauses others at its perturbation points (every 3
    # iterations); a clone that ends below 12 iterations finished by itself (its source's step
    # counter came with the checkpoint): no STOP, where guessing from the rows saw an early stop
    assert {m.kind for ms in marks.values() for m in ms} == {MarkKind.EXPLOIT, MarkKind.PAUSE}
    assert all(m.iteration % 3 == 0 for ms in marks.values() for m in ms)
    exploits = [(tid, m) for tid, ms in marks.items() for m in ms if m.kind is MarkKind.EXPLOIT]
    assert all(m.source in marks and m.source != tid for tid, m in exploits)
    for tid, rows in histories.items():  # the clone's first result says the same source, one iteration later
        for row in rows:
            if row.get("pbt_exploit"):
                assert Mark(MarkKind.EXPLOIT, row["training_iteration"] - 1, row["pbt_exploit"]["source"]) in \
                    marks[tid]

    marks_pbt = marks
    exp = open_experiment(f"{storage}/asha")
    marks, histories = exp.marks(), exp.histories()
    assert all(t["status"] == "TERMINATED" for t in exp.trials)
    # ASHA stops every trial, at a rung or at max_t (a function trainable never says done itself)
    for tid, rows in histories.items():
        assert marks[tid] == [Mark(MarkKind.STOP, rows[-1]["training_iteration"])]
    stopped = len(marks)
    assert any(rows[-1]["training_iteration"] < 12 for rows in histories.values())

    exp = open_experiment(f"{storage}/pause")
    assert exp.marks() == {t["trial_id"]: [Mark(MarkKind.PAUSE, 2)] for t in exp.trials}
    assert all(t["status"] == "TERMINATED" and t["last_result"]["training_iteration"] == 12 for t in exp.trials)
    doc = json.loads(cli("status", f"{storage}/pause", "--json").stdout)
    assert [t["marks"] for t in doc["trials"]] == [[{"kind": "pause", "iteration": 2}]] * 4

    res = cli("plot", f"{storage}/pbt", "--metric", "loss", "--out", str(tmp_path / "pbt.png"), "--log-y")
    assert res.returncode == 0, res.stderr
    pauses = sum(m.kind is MarkKind.PAUSE for ms in marks_pbt.values() for m in ms)
    assert f"({pauses} pause(s), {len(exploits)} PBT exploit(s))" in res.stdout
    res = cli("plot", f"{storage}/asha", "--metric", "loss", "--out", str(tmp_path / "asha.png"))
    assert res.returncode == 0, res.stderr
    assert f"({stopped} stopped by the scheduler)" in res.stdout
    res = cli("plot", f"{storage}/pause", "--metric", "loss", "--out", str(tmp_path / "pause.png"))
    assert res.returncode == 0, res.stderr
    assert "(4 pause(s))" in res.stdout
    for name in ("pbt", "asha", "pause"):
        assert (tmp_path / f"{name}.png").read_bytes()[:8] == PNG_SIGNATURE


def test_trial_events_from_recorded_marks():
    rows = [{"training_iteration": i} for i in range(1, 7)]
    marks = [Mark(MarkKind.PAUSE, 2), Mark(MarkKind.EXPLOIT, 4, "src"), Mark(MarkKind.STOP, 9),
             Mark(MarkKind.FAIL, 0)]
    # at the row of the mark's iteration, else the last row before it; none before the first row
    assert trial_events(rows, "TERMINATED", marks) == [("pause", 1), ("exploit", 3), ("stop", 5)]
    assert trial_events(rows, "TERMINATED", []) == []  # nothing is guessed from the rows any more
    fails = [Mark(MarkKind.FAIL, 2), Mark(MarkKind.FAIL, 6)]
    assert trial_events(rows, "ERROR", fails) == [("failure", 1), ("error", 5)]  # the last is the ERROR
    assert trial_events(rows[:1], "ERROR", []) == [("error", 0)]  # a state written before marks
    assert trial_events(rows, "PAUSED", [Mark(MarkKind.PAUSE, 6)]) == [("paused", 5)]
    assert trial_events([], "PENDING", marks) == []


def test_plot_bad_inputs(experiment, tmp_path):
    out = str(tmp_path / "x.png")
    bad(cli("plot", experiment, "--metric", "acc", "--out", out), "plot", "reported the metric 'acc'")
    bad(cli("plot", experiment, "--metric", "loss", "--x", "epoch", "--out", out), "plot", "x-axis key 'epoch'")
    bad(cli("plot", experiment, "--metric", "loss", "--out", str(tmp_path)), "plot", "is a directory")
    bad(cli("plot", experiment, "--metric", "loss", "--out", str(tmp_path / "no" / "x.png")), "plot",
        "does not exist")
    assert not os.path.exists(out)


def test_plot_without_matplotlib_says_which_extra(experiment, tmp_path):
    shadow = tmp_path / "shadow" / "matplotlib"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ImportError(\"No module named 'matplotlib'\")\n")
    res = cli("plot", experiment, "--metric", "loss", "--out", str(tmp_path / "x.png"),
              pythonpath=str(shadow.parent))
    bad(res, "plot", "plotting needs matplotlib", "pip install 'audition[plot]'")


# ---------------------------------------------------------------------------------- bad locations
def test_bad_locations(experiment, tmp_path):
    bad(cli("status", str(tmp_path / "missing")), "status", "no such directory")
    plain = tmp_path / "plain.txt"
    plain.write_text("hello")
    bad(cli("status", str(plain)), "status", "is a file, not an experiment directory")
    bad(cli("status", f"{experiment}/tuner.pkl"), "status", f"did you mean its directory, {experiment}")
    (tmp_path / "empty").mkdir()
    bad(cli("status", str(tmp_path / "empty")), "status", "is an empty directory")
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.md").write_text("x")
    bad(cli("status", str(tmp_path / "other")), "status", "is not an audition experiment", "notes.md")
    bad(cli("status", os.path.dirname(experiment)), "status", "storage root holding experiments (exp)")
    trial = next(n for n in os.listdir(experiment) if "_00000_" in n)
    bad(cli("status", f"file://{experiment}/{trial}"), "status", f"one trial's directory, not an experiment; "
        f"pass the experiment that holds it: {experiment}")
    bad(cli("status", "nope://bucket/exp"), "status", "unknown storage protocol 'nope'")
    bad(cli("status", experiment, "--storage-options", "{not json"), "status", "--storage-options is not valid JSON")
    bad(cli("status", experiment, "--storage-options", "[1]"), "status", "must be a JSON object")


def _copy_experiment(src: str, dst: str) -> str:
    import shutil

    shutil.copytree(src, dst)
    return dst


def test_corrupt_or_incomplete_state(experiment, tmp_path):
    garbage = _copy_experiment(experiment, str(tmp_path / "garbage"))
    for name in os.listdir(os.path.join(garbage, ".state")):
        with open(os.path.join(garbage, ".state", name), "w") as f:
            f.write("{truncated")
    bad(cli("status", garbage), "status", "corrupted experiment state")
    foreign = _copy_experiment(experiment, str(tmp_path / "foreign"))
    for name in os.listdir(os.path.join(foreign, ".state")):
        with open(os.path.join(foreign, ".state", name), "w") as f:
            json.dump({"trials": [{"trial_id": "a", "status": "WEIRD"}]}, f)
    bad(cli("status", foreign), "status", "corrupted or not written by audition", "unknown status 'WEIRD'")
    stateless = tmp_path / "stateless"
    stateless.mkdir()
    (stateless / "tuner.pkl").write_bytes(b"")
    bad(cli("status", str(stateless)), "status", "no saved experiment state yet")
    bad(cli("resume", str(stateless), "--trainable", "tests.test_cli:healing"), "resume",
        "no saved experiment state yet")


def test_unreadable_tuner_pkl_is_a_note_not_an_error(experiment, tmp_path):
    path = _copy_experiment(experiment, str(tmp_path / "exp"))
    with open(os.path.join(path, "tuner.pkl"), "wb") as f:
        f.write(b"not a pickle")
    res = cli("status", path)
    assert res.returncode == 0, res.stderr
    assert "metric loss (min)" in res.stdout  # the state records them as JSON too (since issue 17)
    assert "note: tuner.pkl could not be read" in res.stdout and "the trainable is unknown" in res.stdout
    assert "best trial " in cli("status", path, "--metric", "loss", "--mode", "min").stdout


# ---------------------------------------------------------------------------------- resume
def test_resume_errored_trial_with_a_fixed_trainable(tmp_path):
    path = run_experiment(str(tmp_path / "results"), "exp")
    res = cli("resume", path, "--trainable", "tests.test_cli:healing", "--resume-errored", "--json",
              env={"AUDITION_TEST_HEALED": "1"})
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert doc["counts"] == {"TERMINATED": 2}
    healed = next(t for t in doc["trials"] if t["config"]["fail"])
    assert healed["last_result"]["training_iteration"] == 4 and healed["error"] is None
    from actors import ExperimentAnalysis

    trial_dir = {t.trial_id: t.path for t in ExperimentAnalysis(path).trials}[healed["trial_id"]]
    with open(os.path.join(trial_dir, "result.json")) as f:
        history = [json.loads(line) for line in f]
    assert [h["training_iteration"] for h in history] == [1, 2, 3, 4]
    assert [h["restored_from"] for h in history] == [-1, -1, 1, 1]  # resumed from its checkpoint
    res = cli("plot", path, "--metric", "loss", "--out", str(tmp_path / "c.png"))
    assert res.returncode == 0 and "(1 failed run(s))" in res.stdout, res.stdout + res.stderr


def test_resume_on_the_multiprocess_system_leaves_no_process(tmp_path, no_leaks):
    """The default system: trial actors are processes forked from the CLI, and all of them end with it."""
    import psutil

    storage = str(tmp_path / "results")
    grid = Tuner(healing, param_space={"x": 1.0, "fail": True}, tune_config=TuneConfig(metric="loss", mode="min"),
                 run_config=RunConfig(name="mp", storage=storage, verbose=0)).fit()
    assert grid.num_errors == 1
    args = ["resume", f"{storage}/mp", "--trainable", "tests.test_cli:healing", "--resume-errored", "--json"]
    res = cli(*args, env={"AUDITION_TEST_HEALED": "1"})
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["counts"] == {"TERMINATED": 1}
    mine = [sys.executable, "-m", "actors._cli", *args]

    def left() -> list[psutil.Process]:
        found = []
        for p in psutil.process_iter(["cmdline", "status"]):
            try:
                if p.info["cmdline"] == mine and p.info["status"] != psutil.STATUS_ZOMBIE:
                    found.append(p)
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                continue
        return found

    psutil.wait_procs(left(), timeout=15)
    assert not left(), "actor processes of the resumed run outlived the CLI"


def test_resume_uses_a_recorded_trainable(tmp_path):
    path = run_experiment(str(tmp_path / "results"), "exp")
    tuner_file = os.path.join(path, "tuner.pkl")
    with open(tuner_file, "rb") as f:
        saved = cloudpickle.load(f)
    saved["trainable_ref"] = "tests.test_cli:healing"
    with open(tuner_file, "wb") as f:
        pickle.dump(saved, f)
    res = cli("resume", path, "--restart-errored", env={"AUDITION_TEST_HEALED": "1"})
    assert res.returncode == 0, res.stderr
    assert "2 trials: 2 TERMINATED" in res.stdout


@pytest.mark.parametrize("interrupted", [False, True])
def test_resume_interrupted_by_ctrl_c_exits_130(experiment, monkeypatch, capsys, interrupted):
    """Tuner.fit() returns after Ctrl-C, as Ray's does; `audition resume` still exits 130 then, as a
    command stopped by Ctrl-C does, naming how to go on (and prints the table when the run ended)."""
    from actors._cli.main import main

    class Fitted:
        def fit(self) -> None:
            self._interrupted = interrupted

    monkeypatch.setattr(Tuner, "restore", classmethod(lambda cls, *a, **k: Fitted()))
    code = main(["resume", experiment, "--trainable", "tests.test_cli:healing"])
    out, err = capsys.readouterr()
    if interrupted:
        assert code == 130
        assert f"interrupted; its state was saved: continue it with audition resume {experiment}" in err
        assert "TERMINATED" not in out
    else:
        assert code == 0, err
        assert "2 trials: 1 ERROR, 1 TERMINATED" in out


@pytest.mark.slow
def test_resume_bad_inputs(experiment):
    bad(cli("resume", experiment), "resume", "records only the name 'healing'", "--trainable MODULE:NAME")
    bad(cli("resume", experiment, "--trainable", "healing"), "resume", "must look like module:function")
    bad(cli("resume", experiment, "--trainable", "no_such_module_xyz:train"), "resume",
        "cannot import 'no_such_module_xyz'")
    bad(cli("resume", experiment, "--trainable", "tests.test_cli:nope"), "resume", "has no attribute 'nope'")
    bad(cli("resume", experiment, "--trainable", "tests.test_cli:ROOT"), "resume", "not a function")
    res = cli("resume", experiment, "--resume-errored", "--restart-errored")
    assert res.returncode == 2 and "not allowed with argument" in res.stderr
    bad(cli("resume", experiment + "-missing", "--trainable", "tests.test_cli:healing"), "resume",
        "no such directory")


# ---------------------------------------------------------------------------------- help
@pytest.mark.parametrize("verb", [["status"], ["plot"], ["resume"], ["worker"], ["cluster"], ["cluster", "status"]],
                         ids=lambda v: " ".join(v))
def test_help(verb):
    res = cli(*verb, "--help")
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith(f"usage: audition {' '.join(verb)}")
    assert "--help" in res.stdout


def test_no_verb_prints_help():
    res = cli()
    assert res.returncode == 0 and "status" in res.stdout and "resume" in res.stdout and "plot" in res.stdout


def _routable_ipv4() -> str | None:
    import ipaddress

    import psutil

    for addrs in psutil.net_if_addrs().values():
        for a in addrs:
            if a.family == 2 and not ipaddress.ip_address(a.address).is_loopback:
                return str(a.address)
    return None


@pytest.mark.slow
def test_resume_multi_host_experiment_with_key_file(tmp_path, no_leaks):
    """A leader beyond loopback refuses to start without the cluster key; ``--key-file`` gives it."""
    from tests._ports import leader_port

    host = _routable_ipv4()
    if host is None:
        pytest.skip("this machine has no non-loopback IPv4 address to lead a convention on")
    key = tmp_path / "cluster.key"
    key.write_text("s3cret-" * 6)
    key.chmod(0o600)
    storage, port = str(tmp_path / "results"), leader_port()
    script = (f"from actors import RunConfig, TuneConfig, Tuner; from tests.test_cli import healing; "
              f"g = Tuner(healing, param_space={{'x': 1.0, 'fail': True}}, "
              f"tune_config=TuneConfig(metric='loss', mode='min'), run_config=RunConfig(name='mh', "
              f"storage={storage!r}, verbose=0, system='tcp://{host}:{port}', leader_runs_trials=True)).fit(); "
              f"assert g.num_errors == 1, g.errors")
    env = {k: v for k, v in os.environ.items() if not k.startswith("AUDITION_CLUSTER_KEY")}
    first = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, cwd=ROOT,
                           env={**env, "PYTHONPATH": ROOT, "AUDITION_CLUSTER_KEY_FILE": str(key)})
    assert first.returncode == 0, first.stderr[-3000:]
    path = f"{storage}/mh"
    resume = ("resume", path, "--trainable", "tests.test_cli:healing", "--resume-errored", "--json")
    bad(cli(*resume, env={"AUDITION_TEST_HEALED": "1"}), "resume", "without a cluster key", "AUDITION_CLUSTER_KEY")
    res = cli(*resume, "--key-file", str(key), env={"AUDITION_TEST_HEALED": "1"})
    assert res.returncode == 0, res.stderr[-3000:]
    assert json.loads(res.stdout)["counts"] == {"TERMINATED": 1}
    key.chmod(0o644)
    bad(cli(*resume, "--key-file", str(key)), "resume", "chmod 600")


def test_status_gives_each_trials_directory_or_none_before_its_first_start(tmp_path):
    from actors._cli.inspect import Experiment
    from storage import ExperimentLayout, StorageContext

    ctx = StorageContext(str(tmp_path))
    layout = ExperimentLayout(ctx, "exp")
    rows = [{"trial_id": "a_00000", "dirname": "train_a_00000_0_x=1_2026-12-04_21-34-30"}, {"trial_id": "a_00001"}]
    named = Experiment("exp", str(tmp_path / "exp"), ctx, layout, {"trials": rows, "trial_dirs": "named"})
    assert [named.trial_path(r) for r in rows] == [
        str(tmp_path / "exp" / "train_a_00000_0_x=1_2026-12-04_21-34-30"), None]  # the second never started
    older = Experiment("exp", str(tmp_path / "exp"), ctx, layout, {"trials": rows})  # saved before names
    assert older.trial_path(rows[1]) == str(tmp_path / "exp" / "a_00001")
