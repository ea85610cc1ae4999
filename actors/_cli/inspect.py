"""Read an experiment back from storage for the CLI (``audition status|plot|resume``), running nothing.

Everything comes from what the engine already writes: the trial table (with each trial's recorded
pauses, stops and exploits, its ``marks``) from the experiment state, metric, mode and trainable
name from ``tuner.pkl``, histories from each trial's ``result.json``. A
location that is not an experiment gets one clear ``ConfigError`` saying what is there instead.
"""

from __future__ import annotations

import importlib
import math
import os
import posixpath
import re
import sys
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from actors._driver.errors import ConfigError
from actors._engine.marks import Mark, marks_from_rows
from actors._engine.trial import TrialStatus
from actors.result import ENGINE_RESULT_KEYS
from storage import PARAMS_NAME, RESULT_NAME, STATE_DIR_NAME, STATE_POINTER_NAME, TUNER_NAME

# Keys the engine adds to results: not shown as user metrics (one list, shared with the controller).
AUTO_KEYS = ENGINE_RESULT_KEYS
_REF = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$")
_STATE_FILES = (TUNER_NAME, STATE_POINTER_NAME, STATE_DIR_NAME)


@dataclass
class Experiment:
    """One experiment as stored: its trial table plus what ``tuner.pkl`` says about it."""

    name: str
    path: str  # the experiment directory, in the form the user wrote (s3://... or a local path)
    ctx: Any
    layout: Any
    state: dict[str, Any]
    metric: str | None = None
    mode: str | None = None
    trainable_name: str | None = None
    trainable_ref: str | None = None  # "module:qualname" when the engine recorded it
    notes: list[str] = field(default_factory=list)

    @property
    def trials(self) -> list[dict[str, Any]]:
        return list(self.state["trials"])

    def counts(self) -> dict[str, int]:
        return dict(sorted(Counter(str(t["status"]) for t in self.trials).items()))

    def marks(self) -> dict[str, list[Mark]]:
        """Every trial's recorded marks, oldest first (none for states written before marks existed)."""
        return {t["trial_id"]: marks_from_rows(t.get("marks")) for t in self.trials}

    def trial_path(self, row: dict[str, Any]) -> str | None:
        """The URL of the trial's directory; None for a trial that never started (named at its first
        start, as Ray's, it has none yet). States written before that name every trial's by its id."""
        from actors._shell.experiment_state import saved_dirname

        name = saved_dirname(self.state, row)
        return None if name is None else self.ctx.uri(posixpath.join(self.layout.experiment_dir, name))

    def histories(self) -> dict[str, list[dict[str, Any]]]:
        """Every trial's result rows (read in parallel: object stores are latency-bound)."""
        from concurrent.futures import ThreadPoolExecutor

        from storage import read_results

        ids = [t["trial_id"] for t in self.trials]
        for t in self.trials:  # TuneConfig(trial_dirname_creator=...) names the directory
            if isinstance(t.get("dirname"), str):
                self.layout.set_dirname(t["trial_id"], t["dirname"])
        with ThreadPoolExecutor(max_workers=8, thread_name_prefix="inspect") as pool:
            rows = list(pool.map(lambda tid: read_results(self.ctx, self.layout, tid), ids))
        return dict(zip(ids, rows))


def parse_storage_options(text: str | None) -> dict[str, Any] | None:
    """``--storage-options`` JSON to a dict (fsspec keyword arguments)."""
    import json

    if text is None:
        return None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"--storage-options is not valid JSON ({exc.msg} at character {exc.pos}); "
                          "pass an object such as '{\"client_kwargs\": {\"endpoint_url\": \"http://...\"}}'") from None
    if not isinstance(value, dict):
        raise ConfigError(f"--storage-options must be a JSON object of fsspec arguments, got {type(value).__name__}")
    return value


def _split(path: str, options: dict[str, Any] | None) -> tuple[Any, Any, str]:
    """(context of the parent, layout of the experiment, URI of the experiment) for ``path``."""
    from storage import ExperimentLayout, StorageContext, StorageError

    if not path.strip():
        raise ConfigError("the experiment path is empty; pass the directory that fit() returned as experiment_path")
    raw = path.strip().removeprefix("file://")
    if "://" in raw:
        protocol, rest = raw.split("://", 1)
        head, name = posixpath.split(rest.strip("/"))
        parent = f"{protocol}://{head}"
        if not head or not name:
            raise ConfigError(f"{path!r} names a bucket or storage root, not an experiment: pass "
                              "<storage>/<experiment name>, the experiment_path that fit() returned")
    else:
        p = os.path.abspath(os.path.expanduser(raw))
        _check_local(p, path)
        parent, name = os.path.split(p)
    try:
        ctx = StorageContext(parent, options)
        layout = ExperimentLayout(ctx, name)
    except (StorageError, ValueError) as exc:
        raise ConfigError(f"cannot read {path}: {exc}") from None
    return ctx, layout, ctx.uri(layout.experiment_dir)


def _check_local(p: str, given: str) -> None:
    if os.path.isfile(p):
        hint = ""
        if os.path.basename(p) in (TUNER_NAME, STATE_POINTER_NAME):
            hint = f" (did you mean its directory, {os.path.dirname(p)}?)"
        raise ConfigError(f"{given} is a file, not an experiment directory{hint}; pass the directory that "
                          "fit() returned as experiment_path")
    if not os.path.exists(p):
        raise ConfigError(f"no such directory: {given}; pass the directory that fit() returned as "
                          "experiment_path (<storage>/<experiment name>)")


def _names(ctx: Any, path: str) -> list[str]:
    from storage._io import list_dir

    return [posixpath.basename(e["name"].rstrip("/")) for e in list_dir(ctx, path)]


def _not_an_experiment(ctx: Any, layout: Any, where: str, names: list[str]) -> ConfigError:
    """Say what is there instead: nothing, a storage root holding experiments, or something else."""
    if not names:
        place = "an empty directory" if ctx.is_local else "empty (no objects under this prefix)"
        return ConfigError(f"{where} is {place}, not an audition experiment; check the path, and for s3:// "
                           "the bucket, prefix and --storage-options")
    if RESULT_NAME in names or PARAMS_NAME in names:
        parent = where.rstrip("/").rsplit("/", 1)[0]
        return ConfigError(f"{where} is one trial's directory, not an experiment; pass the experiment that holds "
                           f"it: {parent}")
    inside = [n for n in sorted(names)[:20] if not n.startswith(".")
              and TUNER_NAME in _names(ctx, posixpath.join(layout.experiment_dir, n))]
    if inside:
        return ConfigError(f"{where} is a storage root holding experiments ({', '.join(inside[:5])}"
                           f"{', ...' if len(inside) > 5 else ''}), not an experiment; pass one of them, "
                           f"e.g. {where.rstrip('/')}/{inside[0]}")
    return ConfigError(f"{where} is not an audition experiment: it has no tuner.pkl or experiment_state.json "
                       f"(it holds {', '.join(sorted(names)[:5])}{', ...' if len(names) > 5 else ''})")


def open_experiment(path: str, options: dict[str, Any] | None = None) -> Experiment:
    """Read the experiment at ``path``; ``ConfigError`` naming the problem if it cannot be shown."""
    from storage import StorageError, read_experiment_state

    ctx, layout, where = _split(path, options)
    try:
        names = _names(ctx, layout.experiment_dir)
        if not any(n in names for n in _STATE_FILES):
            raise _not_an_experiment(ctx, layout, where, names)
        state = read_experiment_state(ctx, layout)
    except StorageError as exc:
        raise ConfigError(str(exc)) from None
    if state is None:
        raise ConfigError(f"{where} has no saved experiment state yet: the run stopped (or is still starting) "
                          "before its first state write, about a second after fit() began; start it again")
    _check_state(state, where)
    exp = Experiment(name=layout.name, path=where, ctx=ctx, layout=layout, state=state)
    _read_tuner(exp, TUNER_NAME in names)
    return exp


def _check_state(state: dict[str, Any], where: str) -> None:
    """A readable JSON document may still not be a trial table: refuse it before anything indexes it."""
    trials: Any = state.get("trials")
    problem = None
    if not isinstance(trials, list):
        problem = "it has no trial list"
    else:
        statuses = {s.value for s in TrialStatus}
        for row in trials:
            if not isinstance(row, dict) or not isinstance(row.get("trial_id"), str):
                problem = f"a trial row has no trial_id ({str(row)[:80]})"
            elif row.get("status") not in statuses:
                problem = f"trial {row['trial_id']} has an unknown status {row.get('status')!r}"
            elif not isinstance(row.get("last_result", {}), dict) or not isinstance(row.get("config", {}), dict):
                problem = f"trial {row['trial_id']} has a malformed config or last result"
            if problem:
                break
    if problem:
        raise ConfigError(f"the experiment state at {where} is corrupted or not written by audition: {problem}. "
                          "Restore the directory from a backup")
    for row in trials:
        row.setdefault("last_result", {})
        row.setdefault("config", {})
        row["last_result"] = row["last_result"] or {}


def _read_tuner(exp: Experiment, present: bool) -> None:
    """Metric, mode and trainable from ``tuner.pkl``; a note (not an error) when it cannot be read."""

    # imported here, not at the top: the dashboard reuses this module and must not load the unpickler
    from actors._legacy import loads as legacy_loads
    from storage import read_bytes

    state = exp.state
    exp.metric, exp.mode = state.get("metric"), state.get("mode")  # newer engines may record them here
    exp.trainable_ref = state.get("trainable_ref")
    unknown = "the trainable is" if exp.metric and exp.mode else "metric, mode and trainable are"
    if not present:
        exp.notes.append(f"tuner.pkl is missing: {unknown} unknown")
        return
    try:
        saved = legacy_loads(read_bytes(exp.ctx, exp.layout.tuner_file, what="reading tuner.pkl"))
        tc, spec = saved["tune_config"], saved.get("spec")
    except Exception as exc:
        exp.notes.append(f"tuner.pkl could not be read ({type(exc).__name__}: {str(exc)[:120]}): {unknown} "
                         "unknown")
        return
    exp.metric = exp.metric or getattr(tc, "metric", None)
    exp.mode = exp.mode or getattr(tc, "mode", None)
    exp.trainable_name = getattr(spec, "trainable_name", None)
    extra = getattr(spec, "extra", None) or {}
    exp.trainable_ref = exp.trainable_ref or saved.get("trainable_ref") or extra.get("trainable_ref")


# ---------------------------------------------------------------------------------- numbers
def number(value: Any) -> float | None:
    """A finite-or-not float for a metric value; None for anything that is not a number."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def resolve_metric(exp: Experiment, metric: str | None, mode: str | None) -> tuple[str | None, str | None]:
    """Command-line ``--metric/--mode`` over the experiment's own; both or neither."""
    if mode is not None and mode not in ("min", "max"):
        raise ConfigError(f"--mode must be 'min' or 'max', got {mode!r}")
    if metric is None:
        return exp.metric, mode or exp.mode
    if mode is None:
        if metric == exp.metric and exp.mode:
            return metric, exp.mode
        raise ConfigError(f"--metric {metric} needs --mode min or --mode max (the experiment's own metric is "
                          f"{exp.metric!r})")
    return metric, mode


def best_trial(exp: Experiment, metric: str | None, mode: str | None) -> tuple[dict[str, Any], float] | None:
    """The trial whose last ``metric`` is best (NaN and inf ignored), like ``get_best_result()``."""
    if metric is None or mode is None:
        return None
    scored = []
    for row in exp.trials:
        v = number(row["last_result"].get(metric))
        if v is not None and math.isfinite(v):
            scored.append((v, row))
    if not scored:
        return None
    pick = min if mode == "min" else max
    value, row = pick(scored, key=lambda p: p[0])
    return row, value


def check_metric_known(exp: Experiment, metric: str, histories: dict[str, list[dict[str, Any]]] | None = None,
                       what: str = "the metric") -> None:
    """A metric named on the command line must exist somewhere, else list what does."""
    rows = [r for h in histories.values() for r in h] if histories is not None else \
        [t["last_result"] for t in exp.trials]
    if not rows or any(metric in r for r in rows):
        return
    known = sorted({k for r in rows for k in r if k not in AUTO_KEYS} | {"training_iteration", "time_total_s"})
    raise ConfigError(f"no trial of {exp.name} reported {what} {metric!r}; reported keys are {known}")


# ---------------------------------------------------------------------------------- trainable
def load_trainable(ref: str, flag: str = "--trainable") -> Callable[..., Any]:
    """Import ``module:function`` (or ``module:Class``), with the current directory on the path."""
    if not _REF.match(ref):
        raise ConfigError(f"{flag} must look like module:function (e.g. my_project.train:train), got {ref!r}")
    module_name, attr = ref.split(":", 1)
    if module_name == "__main__":
        raise ConfigError(f"{flag} {ref}: the trainable was defined in a script run as __main__, which cannot be "
                          "imported by name; pass --trainable MODULE:NAME for a module that defines it")
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigError(f"{flag} {ref}: cannot import {module_name!r} ({exc}); run audition from the directory "
                          "that holds it, or add that directory to PYTHONPATH") from None
    except Exception as exc:
        raise ConfigError(f"{flag} {ref}: importing {module_name!r} raised {type(exc).__name__}: {exc}") from None
    obj: Any = module
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise ConfigError(f"{flag} {ref}: module {module_name!r} has no attribute {attr!r}")
        obj = getattr(obj, part)
    if not callable(obj):
        raise ConfigError(f"{flag} {ref}: {attr!r} is a {type(obj).__name__}, not a function or Trainable class")
    return obj  # type: ignore[no-any-return]


def recorded_trainable(exp: Experiment) -> Callable[..., Any]:
    """The trainable named in the experiment, when it recorded an importable module for it."""
    if exp.trainable_ref:
        return load_trainable(exp.trainable_ref, flag="the recorded trainable")
    named = f" (it records only the name {exp.trainable_name!r}, not its module)" if exp.trainable_name else ""
    raise ConfigError(f"cannot tell which trainable {exp.name} used{named}; pass --trainable MODULE:NAME, "
                      "e.g. --trainable my_project.train:train")


__all__ = ["AUTO_KEYS", "Experiment", "best_trial", "check_metric_known", "load_trainable", "open_experiment",
           "parse_storage_options", "recorded_trainable", "resolve_metric"]
