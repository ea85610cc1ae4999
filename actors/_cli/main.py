"""The ``audition`` command line.

Every verb reports a problem it can explain as ``audition <verb>: <message>`` on stderr and exits
2; a resumed experiment that fails while running exits 1. Tracebacks are kept for real bugs.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import sys
import time
from typing import Any

_STORAGE_HELP = ("fsspec options as JSON, e.g. '{\"client_kwargs\": {\"endpoint_url\": \"http://minio:9000\"}}'; "
                 "without a key, S3 credentials come from the AWS_* environment")
_KEY_FILE_HELP = ("file holding the cluster key, mode 0600 (instead of $AUDITION_CLUSTER_KEY or "
                  "$AUDITION_CLUSTER_KEY_FILE); the leader and every worker need the same key (docs/security.md)")
_URL_HELP = "the experiment directory: <storage>/<experiment name> (a local path or s3://bucket/prefix/name)"


def _parser() -> argparse.ArgumentParser:
    from actors import __version__

    parser = argparse.ArgumentParser(prog="audition", description="Hyperparameter tuning on Thespian actors.")
    parser.add_argument("--version", action="version", version=f"audition {__version__}")
    sub = parser.add_subparsers(dest="verb", metavar="VERB")
    w = sub.add_parser("worker", help="join a leader's convention and run trials placed on this machine",
                       description="Join a leader's convention and run trials placed on this machine.")
    w.add_argument("--leader", required=True, help="HOST:PORT of the driver's system (RunConfig(system='tcp://…'))")
    w.add_argument("--bind", help="address to listen on (default: the one on the route to the leader)")
    w.add_argument("--port", type=int, help="admin port of this member (default: a free one)")
    w.add_argument("--cpus", type=float, help="CPUs to offer (default: all)")
    w.add_argument("--resources", help='other resources as JSON, e.g. \'{"gpu": 1}\'')
    w.add_argument("--id", dest="member_id", help="member identity (default: HOSTNAME-PORT)")
    w.add_argument("--key-file", metavar="PATH", help=_KEY_FILE_HELP)
    w.add_argument("--join-timeout", type=float, default=10.0, metavar="SECONDS",
                   help="how long to wait for the leader to listen before giving up (default: 10)")
    c = sub.add_parser("cluster", help="inspect a running multi-host experiment",
                       description="Inspect a running multi-host experiment.")
    csub = c.add_subparsers(dest="cluster_verb", required=True, metavar="VERB")
    st = csub.add_parser("status", help="members, their free resources and the trial counts",
                         description="Members, their free resources and the trial counts.")
    st.add_argument("--leader", required=True, help="HOST:PORT of the driver's system (run on the leader's machine)")
    st.add_argument("--json", action="store_true", help="print JSON for scripts")
    st.add_argument("--key-file", metavar="PATH", help=_KEY_FILE_HELP)

    s = sub.add_parser("status", help="the trial table of an experiment in storage (runs nothing)",
                       description="Show an experiment's trials from storage: status counts, the best trial and "
                       "each trial's last metrics. Reads only; works while the experiment runs. It unpickles "
                       "tuner.pkl for the metric and mode: only inspect experiments you trust.",
                       epilog="example: audition status ~/audition_results/my_run --metric loss --mode min")
    s.add_argument("url", metavar="URL", help=_URL_HELP)
    s.add_argument("--json", action="store_true", help="print JSON for scripts")
    s.add_argument("--metric", help="rank trials by this metric (default: the experiment's TuneConfig.metric)")
    s.add_argument("--mode", choices=("min", "max"), help="with --metric: whether lower or higher is better")
    s.add_argument("--storage-options", metavar="JSON", help=_STORAGE_HELP)

    p = sub.add_parser("plot", help="learning curves of every trial, as a PNG",
                       description="Plot a metric of every trial against training_iteration into a PNG, marking "
                       "where the scheduler paused, stopped or exploited a trial (as the engine recorded "
                       "it), failed runs and errors. "
                       "Needs matplotlib: pip install 'audition[plot]'.",
                       epilog="example: audition plot s3://bucket/runs/my_run --metric loss --out loss.png")
    p.add_argument("url", metavar="URL", help=_URL_HELP)
    p.add_argument("--metric", required=True, help="the result key to plot")
    p.add_argument("--out", default="curves.png", help="PNG file to write (default: curves.png)")
    p.add_argument("--x", default="training_iteration", help="result key for the x axis (default: %(default)s)")
    p.add_argument("--log-y", action="store_true", help="logarithmic y axis (non-positive values are left out)")
    p.add_argument("--storage-options", metavar="JSON", help=_STORAGE_HELP)

    r = sub.add_parser("resume", help="continue an interrupted experiment (Tuner.restore(...).fit())",
                       description="Continue an experiment from its last saved state: finished trials stay, "
                       "unfinished ones resume from their latest checkpoint. Make sure the old run has stopped.",
                       epilog="example: audition resume ~/audition_results/my_run --trainable my_project.train:train "
                       "--resume-errored")
    r.add_argument("url", metavar="URL", help=_URL_HELP)
    r.add_argument("--trainable", metavar="MODULE:NAME",
                   help="the function or Trainable class to run, imported from the current directory or PYTHONPATH "
                   "(default: the one the experiment recorded, if importable)")
    errored = r.add_mutually_exclusive_group()
    errored.add_argument("--resume-errored", action="store_true",
                         help="run trials that ended in ERROR again, from their latest checkpoint")
    errored.add_argument("--restart-errored", action="store_true",
                         help="run trials that ended in ERROR again from scratch, as new trials (new ids and "
                         "directories, as Ray's; the old directories are kept)")
    r.add_argument("--no-resume-unfinished", action="store_true",
                   help="end RUNNING, PENDING and PAUSED trials as TERMINATED instead of continuing them")
    r.add_argument("--json", action="store_true", help="print the final trial table as JSON")
    r.add_argument("--storage-options", metavar="JSON", help=_STORAGE_HELP)
    r.add_argument("--key-file", metavar="PATH", help=_KEY_FILE_HELP + "; needed to resume a multi-host experiment "
                   "whose leader listens beyond loopback")
    from actors._dashboard.command import add_parser as add_dashboard

    add_dashboard(sub, _URL_HELP, _STORAGE_HELP, _KEY_FILE_HELP)
    g = sub.add_parser("migrate", help="rewrite a Ray Tune script's imports to audition's",
                       description="Rewrite the Ray Tune imports of a Python script to audition's (from ray import "
                       "tune -> import actors as tune, ray.tune.schedulers -> actors.schedulers, ...), remove "
                       "ray.init()/ray.shutdown() calls, and keep everything else as it is. Prints the result; "
                       "every ray name it cannot map is listed on stderr with its line, and the exit code is 1.",
                       epilog="example: audition migrate train.py --diff, then audition migrate train.py --write")
    g.add_argument("file", metavar="FILE.py", help="the script to migrate")
    g.add_argument("--write", action="store_true", help="write the result back to FILE.py instead of printing it")
    g.add_argument("--diff", action="store_true", help="print a unified diff instead of the whole file")
    return parser


def main(argv: list[str] | None = None) -> int:
    from actors._driver.errors import ConfigError, TuneError
    from storage import StorageError

    parser = _parser()
    args = parser.parse_args(argv)
    if args.verb is None:
        parser.print_help()
        return 0
    verb = "cluster status" if args.verb == "cluster" else args.verb
    if verb in ("status", "plot", "resume", "dashboard"):  # the multi-host verbs keep their own output as it was
        logging.basicConfig(level=logging.WARNING, format=f"audition {verb}: %(message)s", stream=sys.stderr)
        if verb == "resume":
            logging.getLogger("audition").setLevel(logging.INFO)  # progress, not Thespian's chatter
    handler = {"worker": _worker, "cluster status": _cluster_status, "status": _status, "plot": _plot,
               "resume": _resume, "migrate": _migrate, "dashboard": _dashboard}[verb]
    try:
        return handler(args)
    except (ConfigError, StorageError) as exc:
        print(f"audition {verb}: {exc}", file=sys.stderr)
        return 2
    except TuneError as exc:
        print(f"audition {verb}: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"audition {verb}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `audition status ... | head`: the reader left, which is fine
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error at exit
        return 0


# ---------------------------------------------------------------------------------- migrate
def _audition_has(module: str, name: str) -> bool:
    """Whether ``from <module> import <name>`` works in this audition (lazy names included)."""
    import importlib

    try:
        target = importlib.import_module(module)
    except ImportError:
        return False
    return name in getattr(target, "__all__", ()) or hasattr(target, name)


def _migrate(args: argparse.Namespace) -> int:
    import difflib

    from actors._cli.migrate import migrate
    from actors._driver.errors import ConfigError

    try:
        with open(args.file, encoding="utf-8") as f:
            source = f.read()
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read {args.file}: {exc}") from None
    try:
        result = migrate(source, _audition_has)
    except SyntaxError as exc:
        raise ConfigError(f"{args.file} is not valid Python (line {exc.lineno}: {exc.msg}); fix it first") from None
    if args.diff:
        sys.stdout.writelines(difflib.unified_diff(source.splitlines(keepends=True),
                                                   result.text.splitlines(keepends=True),
                                                   args.file, f"{args.file} (migrated)"))
    elif not args.write:
        sys.stdout.write(result.text)
    if args.write and result.text != source:
        tmp = f"{args.file}.audition-migrate.tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(result.text)
        os.replace(tmp, args.file)  # never a half-written script
        print(f"audition migrate: wrote {args.file} ({result.changes} change(s))", file=sys.stderr)
    for warning in result.warnings:
        print(f"audition migrate: {args.file}:{warning.line}: {warning.name}: {warning.why}", file=sys.stderr)
    if result.warnings:
        print(f"audition migrate: {len(result.warnings)} ray name(s) left to port by hand", file=sys.stderr)
    return 1 if result.warnings else 0


# ---------------------------------------------------------------------------------- multi-host
def _worker(args: argparse.Namespace) -> int:
    from actors._cluster.member import run_worker

    return run_worker(args.leader, args.bind, args.port, args.cpus, args.resources, args.member_id,
                      key_file=args.key_file, join_timeout_s=args.join_timeout)


def _cluster_status(args: argparse.Namespace) -> int:
    from actors._cluster.member import cluster_status

    status = cluster_status(args.leader, key_file=args.key_file)
    if args.json:
        print(json.dumps(status, indent=2, sort_keys=True))
        return 0
    if status["experiment"] is None:
        print("no experiment is running on this leader")
        return 0
    print(f"experiment {status['experiment']}: " +
          ", ".join(f"{n} {s}" for s, n in sorted(status["trials"].items())))
    for m in status["members"]:
        free = ", ".join(f"{k} {v:g}/{m['resources'][k]:g}" for k, v in sorted(m["free"].items()))
        state = "LOST" if m.get("lost") else "ok"
        print(f"  {m['member']:<24} {state:<5} free {free}  trials {len(m['trials'])}")
    return 0


# ---------------------------------------------------------------------------------- storage verbs
def _status(args: argparse.Namespace) -> int:
    from actors._cli.inspect import check_metric_known, open_experiment, parse_storage_options, resolve_metric

    exp = open_experiment(args.url, parse_storage_options(args.storage_options))
    metric, mode = resolve_metric(exp, args.metric, args.mode)
    if args.metric:
        check_metric_known(exp, args.metric)
    _print_table(exp, metric, mode, args.json)
    return 0


def _plot(args: argparse.Namespace) -> int:
    from actors._cli.inspect import open_experiment, parse_storage_options
    from actors._cli.plot import check_out, plot_curves, require_matplotlib

    check_out(args.out)
    require_matplotlib()
    exp = open_experiment(args.url, parse_storage_options(args.storage_options))
    drawn = plot_curves(exp, args.metric, args.out, x=args.x, log_y=args.log_y)
    names = {"pause": "pause(s)", "exploit": "PBT exploit(s)", "stop": "stopped by the scheduler",
             "failure": "failed run(s)", "paused": "paused", "error": "in ERROR"}
    marks = ", ".join(f"{n} {names[k]}" for k, n in drawn.items() if k in names)
    print(f"wrote {drawn['out']}: {drawn['trials']} trials" + (f" ({marks})" if marks else ""))
    return 0


def _dashboard(args: argparse.Namespace) -> int:
    from actors._dashboard.command import run

    return run(args)


def _resume(args: argparse.Namespace) -> int:
    from actors import Tuner
    from actors._cli.inspect import load_trainable, open_experiment, parse_storage_options, recorded_trainable

    options = parse_storage_options(args.storage_options)
    if args.key_file:
        _use_key_file(args.key_file)
    exp = open_experiment(args.url, options)  # clear errors before anything starts
    trainable = load_trainable(args.trainable) if args.trainable else recorded_trainable(exp)
    tuner = Tuner.restore(exp.path, trainable, resume_unfinished=not args.no_resume_unfinished,
                          resume_errored=args.resume_errored, restart_errored=args.restart_errored,
                          storage_options=options)
    tuner.fit()
    if getattr(tuner, "_interrupted", False):  # fit() returned after Ctrl-C, as Ray's does; a command exits 130
        print(f"audition resume: interrupted; its state was saved: continue it with audition resume {args.url}",
              file=sys.stderr)
        return 130
    _print_table(open_experiment(exp.path, options), exp.metric, exp.mode, args.json)
    return 0


def _use_key_file(path: str) -> None:
    """The restored leader (and a helper that shuts an orphaned system down) read the key from
    the environment, as a leader started by ``fit()`` does."""
    from actors._cluster.auth_keys import ENV_KEY, ENV_KEY_FILE, load_key_file
    from actors._driver.errors import ConfigError

    load_key_file(path)  # a missing or world-readable file is reported before anything starts
    if os.environ.get(ENV_KEY):
        raise ConfigError(f"--key-file given while ${ENV_KEY} is set: use one of them")
    os.environ[ENV_KEY_FILE] = os.path.abspath(path)


# ---------------------------------------------------------------------------------- output
def _print_table(exp: Any, metric: str | None, mode: str | None, as_json: bool) -> None:
    from actors._cli.inspect import best_trial

    best = best_trial(exp, metric, mode)
    if as_json:
        marks = exp.marks()
        doc = {
            "experiment": exp.name, "path": exp.path, "trainable": exp.trainable_name, "metric": metric,
            "mode": mode, "state_written_at": exp.state.get("written_at"), "counts": exp.counts(),
            "num_trials": len(exp.trials),
            "best": None if best is None else {"trial_id": best[0]["trial_id"], "value": best[1],
                                               "config": best[0]["config"]},
            "trials": [{"trial_id": t["trial_id"], "status": t["status"], "path": exp.trial_path(t),
                        "config": t["config"],
                        "last_result": t["last_result"], "num_failures": t.get("num_failures", 0),
                        "error": _first_line(t.get("error")),
                        "checkpoint_iteration": (t.get("checkpoint") or {}).get("iteration"),
                        "marks": [m.to_dict() for m in marks[t["trial_id"]]]} for t in exp.trials],
            "notes": exp.notes,
        }
        print(json.dumps(_finite(doc), indent=2, allow_nan=False, default=str))
        return
    print("\n".join(_text(exp, metric, mode, best)))


def _text(exp: Any, metric: str | None, mode: str | None, best: Any) -> list[str]:
    from actors._cli.inspect import AUTO_KEYS, number

    trials = exp.trials
    lines = [f"experiment {exp.name} at {exp.path}"]
    facts = [f"trainable {exp.trainable_name}" if exp.trainable_name else "",
             f"metric {metric} ({mode})" if metric and mode else "no metric/mode: pass --metric and --mode"]
    written = exp.state.get("written_at")
    if isinstance(written, (int, float)):
        stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(written))
        facts.append(f"state saved {stamp} ({_ago(time.time() - written)} ago)")
    lines.append(", ".join(f for f in facts if f))
    counts = ", ".join(f"{n} {s}" for s, n in exp.counts().items())
    lines.append(f"{len(trials)} trial{'s' if len(trials) != 1 else ''}" + (f": {counts}" if counts else ""))
    if best is not None:
        row, value = best
        it = row["last_result"].get("training_iteration", "?")
        lines.append(f"best trial {row['trial_id']}: {metric}={value:.6g} at iteration {it}, config "
                     f"{_config_text(row['config'], 200)}")
    elif metric and mode:
        lines.append(f"best trial: none yet (no trial has reported a finite {metric!r})")
    if not trials:
        return lines
    keys = sorted({k for t in trials for k, v in t["last_result"].items()
                   if k not in AUTO_KEYS and k != metric and number(v) is not None})
    shown = ([metric] if metric else []) + keys[: 3 if metric else 4]
    header = ["trial", "status", "iter", "total s", *shown, "config"]
    table = [header]
    for t in trials:
        last = t["last_result"]
        table.append([t["trial_id"], t["status"], _cell(last.get("training_iteration")),
                      _cell(last.get("time_total_s"), ".1f"), *(_cell(last.get(k)) for k in shown),
                      _config_text(t["config"], 60)])
    widths = [max(len(r[i]) for r in table) for i in range(len(header) - 1)]
    lines.append("")
    for r in table:
        lines.append("  ".join(c.ljust(w) for c, w in zip(r, widths)) + "  " + r[-1])
    errors = [t for t in trials if t["status"] == "ERROR"]
    if errors:
        lines += ["", "errors:"]
        for t in errors:
            n = t.get("num_failures", 0)
            lines.append(f"  {t['trial_id']} ({n} failure{'s' if n != 1 else ''}): {_first_line(t.get('error'))}")
    for note in exp.notes:
        lines.append(f"note: {note}")
    return lines


def _cell(value: Any, fmt: str = ".4g") -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return format(value, fmt)
    return str(value)


def _config_text(config: dict[str, Any], limit: int) -> str:
    from storage import flatten

    text = ", ".join(f"{k}={_cell(v)}" for k, v in flatten(config).items()) or "{}"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _first_line(error: Any) -> str | None:
    return str(error).strip().splitlines()[0] if error else None


def _ago(seconds: float) -> str:
    if seconds < 120:
        return f"{max(seconds, 0):.0f}s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    if seconds < 172800:
        return f"{seconds / 3600:.0f} h"
    return f"{seconds / 86400:.0f} days"


def _finite(value: Any) -> Any:
    """Strict JSON: NaN and infinities become the strings "nan", "inf", "-inf"."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {str(k): _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


if __name__ == "__main__":
    sys.exit(main())
