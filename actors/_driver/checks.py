"""Up-front checks of what ``Tuner(...)`` / ``fit()`` are given, and the result check in ``report()``.

Each refuses a mistake that would otherwise surface late (in every trial, at the first result,
deep in the controller) or never (a hang): the message names the argument and the fix.
"""

from __future__ import annotations

import functools
import inspect
import logging
import os
import pickle
import sys
from typing import Any

import cloudpickle

from actors._driver.errors import ConfigError

log = logging.getLogger("audition")

# result values of these types always pickle: no need to try (the hot path of report())
_PLAIN: set[type] = {int, float, str, bool, type(None)}


def pickled(obj: Any, what: str) -> bytes:
    """``obj`` cloudpickled, and loaded back once: what cannot travel to the actors fails here, named."""
    try:
        data = cloudpickle.dumps(obj)
        cloudpickle.loads(data)
        return data
    except Exception as exc:
        raise ConfigError(
            f"the {what} cannot be pickled ({type(exc).__name__}: {exc}); it must not capture locks, open "
            "files, sockets or similar objects: create those inside the trainable instead"
        ) from exc


def pickled_search(searcher: Any, stopper: Any, param_space: dict[str, Any] | None) -> None:
    """The searcher (which holds the param_space) and the stopper travel to the controller: a param_space value
    that cannot is named by its key, anything else as the searcher's or the stopper's."""
    try:
        pickled((searcher, stopper), "search algorithm or stopper")
    except ConfigError as failed:
        try:  # (only on failure: the param_space is pickled with the searcher above)
            cloudpickle.dumps(param_space)
        except Exception as exc:
            raise ConfigError(
                f"param_space{_unpicklable_at(param_space)} cannot be pickled ({type(exc).__name__}: {exc}); a "
                "trial's config is sent to the process that runs it: pass plain values (numbers, strings, lists, "
                "dicts, search spaces) and create locks, open files, clients or models inside the trainable") from exc
        raise failed


def _unpicklable_at(value: Any) -> str:
    """The first key path (``['a']['b']``) under which ``value`` holds what cannot be pickled ('' for itself)."""
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, (list, tuple)) else ()
    for key, item in items:
        try:
            cloudpickle.dumps(item)
        except Exception:
            return f"[{key!r}]{_unpicklable_at(item)}"
    return ""


def check_callbacks(callbacks: list[Any] | None, where: str) -> None:
    """Callbacks are ``actors.Callback`` instances; one that runs in the controller must pickle."""
    from actors._driver.callbacks import Callback
    from actors._driver.loggers import LoggerCallback

    for cb in callbacks or []:
        if not isinstance(cb, Callback):
            raise ConfigError(f"{where} takes actors.Callback instances, got {type(cb).__name__}; "
                              "subclass actors.Callback")
        if isinstance(cb, LoggerCallback) and cb.in_controller:
            try:
                cloudpickle.dumps(cb)
            except Exception as exc:
                raise ConfigError(f"{where}: {type(cb).__name__} runs in the controller (in_controller = True), "
                                  f"so it must pickle, and it does not ({exc}); open files and clients in its "
                                  "setup() or lazily, not in __init__") from None


def callable_name(trainable: Any) -> str:
    """A function trainable's name, by Ray 2.60's rule (``Experiment.get_trainable_name``): its ``_name``, else
    its ``__name__`` (``lambda`` for a lambda, ``DEFAULT`` for another ``<...>``), else a ``functools.partial``'s
    function's name, else ``DEFAULT`` (a callable object: recorded, Ray names its trials ``DEFAULT_<id>``)."""
    if hasattr(trainable, "_name"):
        return str(trainable._name)
    if hasattr(trainable, "__name__"):
        raw = str(trainable.__name__)
        return "lambda" if raw == "<lambda>" else "DEFAULT" if raw.startswith("<") else raw
    func = getattr(trainable, "func", None) if isinstance(trainable, functools.partial) else None
    if func is not None and hasattr(func, "__name__"):
        return str(func.__name__)
    log.warning("No name detected on trainable. Using DEFAULT.")
    return "DEFAULT"


def check_trainable(trainable: Any) -> str:
    """The trainable's name; refuses what could never run (Ray's rule: ``fn(config)`` must bind)."""
    from actors._driver.trainable import Trainable

    if inspect.isclass(trainable):
        if not issubclass(trainable, Trainable):
            raise ConfigError(f"trainable class {trainable.__name__} must subclass actors.Trainable")
        return trainable.__name__
    raw = str(getattr(trainable, "__name__", type(trainable).__name__))  # (what error messages show)
    name = callable_name(trainable)
    if not callable(trainable):
        raise ConfigError(f"trainable must be a function taking a config dict or a Trainable subclass, "
                          f"got {type(trainable).__name__}")
    try:
        sig = inspect.signature(trainable)
    except (TypeError, ValueError):
        return name  # a builtin or extension callable without a signature: trust it
    try:
        sig.bind({})
    except TypeError:
        shown = raw if raw.isidentifier() else "train_fn"
        raise ConfigError(f"trainable {raw!r} must take one argument, the config dict (it takes {sig}); "
                          f"define it as def {shown}(config): ... and read the hyperparameters from config, "
                          "as Ray Tune requires") from None
    return name


def resolve_checkpoint_at_end(trainable: Any, checkpoint_config: Any) -> bool:
    """``CheckpointConfig(checkpoint_at_end=...)`` for this trainable, with Ray 2.60's default.

    As in Ray's ``TunerInternal``, ``None`` (the default) means ``False`` for a function trainable
    and ``True`` for a class trainable, and a function trainable refuses ``True`` (and a
    ``checkpoint_frequency``). One deliberate difference: a class that does not override
    ``save_checkpoint`` defaults to ``False``, because Ray's default there ends every trial in ERROR
    (its ``Trainable.save_checkpoint`` raises ``NotImplementedError`` at the end save).
    """
    from actors._driver.trainable import Trainable

    given = checkpoint_config.checkpoint_at_end
    if not inspect.isclass(trainable):
        if given:
            raise ConfigError("CheckpointConfig(checkpoint_at_end=True) cannot be used with a function "
                              "trainable (as in Ray Tune): report(metrics, checkpoint=...) once more at the "
                              "end of the training loop instead")
        if checkpoint_config.checkpoint_frequency:
            raise ConfigError("CheckpointConfig(checkpoint_frequency=...) cannot be set for a function "
                              "trainable (as in Ray Tune): report a checkpoint every N iterations in the "
                              "training loop with report(metrics, checkpoint=...)")
        return False
    if given is not None:
        return bool(given)
    return getattr(trainable, "save_checkpoint", None) is not Trainable.save_checkpoint


def check_scheduler_objective(scheduler: Any, metric: str | None, mode: str | None,
                              spec: dict[str, Any] | None = None) -> None:
    """Give the scheduler the experiment's metric/mode and Ray's public ``spec``; refuse a conflict or a
    missing objective.

    Ray refuses metric/mode on both a built-in scheduler and ``TuneConfig``; audition's built-ins accept
    the same value in both places and refuse a different one. A scheduler whose ``set_search_properties``
    answers False is refused with Ray's reason.
    """
    from actors._driver.searcher_setup import set_search_properties
    from actors.schedulers._common import MetricScheduler

    name = type(scheduler).__name__
    for what, tuned in (("metric", metric), ("mode", mode)):
        own = getattr(scheduler, what, None)
        if own is not None and tuned is not None and str(own) != str(tuned):
            raise ConfigError(f"{what} is {str(own)!r} in {name}(...) but {tuned!r} in TuneConfig(...); "
                              f"give {what} in one place only (or the same in both)")
    try:
        answer = set_search_properties(scheduler, metric, mode, **(spec or {}))
        if not answer:  # (as Ray: any false answer, None too)
            raise ConfigError(
                f"{name}.set_search_properties() refused the experiment's metric/mode (it returned {answer!r}): "
                "the scheduler was built with its own metric and mode. Give them to the scheduler or to "
                "TuneConfig, not both (as Ray Tune refuses it); a scheduler that takes them returns True")
        if isinstance(scheduler, MetricScheduler):
            scheduler._objective()
    except (TypeError, ValueError) as exc:
        if isinstance(exc, ConfigError):
            raise
        raise ConfigError(str(exc)) from None


def required_metrics(metric: str | None, scheduler: Any, searcher: Any) -> tuple[tuple[str, str], ...]:
    """The metrics every result must hold and who asks for each (Ray Tune's strict metric check).

    None with ``TUNE_DISABLE_STRICT_METRIC_CHECKING=1`` (Ray's switch); a scheduler built with
    ``skip_missing=True`` passes over results without its metric, so it does not require it."""
    if os.environ.get("TUNE_DISABLE_STRICT_METRIC_CHECKING", "0") not in ("", "0"):
        return ()
    out: list[tuple[str, str]] = []
    searched = getattr(searcher, "metric", None)  # a list for a multi-objective searcher: each is required
    while getattr(searcher, "transparent", False):  # (the Tuner's own wrapper: name the user's searcher)
        searcher = searcher.searcher
    for key, where in ((metric, "TuneConfig(metric=...)"),
                       (None if getattr(scheduler, "skip_missing", False) else getattr(scheduler, "metric", None),
                        f"{type(scheduler).__name__}(metric=...)"),
                       *((m, f"{type(searcher).__name__}(metric=...)")
                         for m in (searched if isinstance(searched, list) else [searched]))):
        if isinstance(key, str) and key and key not in [k for k, _ in out]:
            out.append((key, where))
    return tuple(out)


def make_run_stopper(stop: Any) -> Any:
    """``RunConfig(stop=...)`` as a Stopper, or a ConfigError that names ``stop=``."""
    from actors.stoppers import make_stopper

    try:
        return make_stopper(stop)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"RunConfig(stop=...) is invalid: {exc}") from None


def claim_name(ctx: Any, name: str, chosen: bool) -> str:
    """The experiment name ``fit()`` writes under: never over an earlier experiment's state.

    A name that already holds an experiment's state gets a suffix (``name_2``, ``name_3``, ...), so the
    script runs again as under Ray Tune, which writes the new run into the same directory and mixes
    the two; a name the user chose is taken that way with a warning that names both directories.
    """
    from storage import ExperimentLayout, exists, has_experiment_state

    base, n, taken = name, 1, None
    while True:
        layout = ExperimentLayout(ctx, name)
        if has_experiment_state(ctx, layout):
            taken = taken or ctx.uri(layout.experiment_dir)
        elif exists(ctx, layout.tuner_file):
            if chosen and taken is None:  # a run that died before its first state save: nothing to restore
                log.warning("experiment %s never saved its state (it cannot be restored); its tuner.pkl is "
                            "replaced, its trial directories are left alone", ctx.uri(layout.experiment_dir))
                return name
        else:
            if chosen and taken is not None:
                log.warning(
                    "an experiment named %r already exists at %s (continue it with Tuner.restore(%r, "
                    "trainable=...), or tune.run(..., resume='AUTO')); this run is saved as %r at %s, so nothing "
                    "of the earlier one is "
                    "overwritten (Ray Tune would write it into the same directory)", base, taken, taken, name,
                    ctx.uri(layout.experiment_dir))
            return name
        n += 1
        name = f"{base}_{n}"


def check_result(metrics: dict[str, Any]) -> None:
    """Refuse a result that cannot travel to the controller (pickle), naming the key.

    Values of plain types (and of types seen pickling before, e.g. numpy scalars) are not
    pickled here, so a result of numbers costs one type lookup per key.
    """
    for key, value in metrics.items():
        if type(key) is not str and not isinstance(key, str):
            raise TypeError(f"report(): metric names must be strings, got {key!r} ({type(key).__name__}); "
                            "use str keys such as 'loss'")
        kind = type(value)
        if kind in _PLAIN:
            continue
        try:
            pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
        except Exception:
            try:  # a lambda or a local function: the transport sends it by cloudpickle (system._ByValueWhenNeeded)
                cloudpickle.dumps(value)
            except Exception as exc:
                raise TypeError(
                    f"report(): the value of {key!r} ({kind.__name__}) cannot be sent to the controller "
                    f"because it cannot be pickled ({exc}); report numbers, strings or other plain data, "
                    "and keep objects such as locks, files or models out of the result") from None
        np = sys.modules.get("numpy")
        if np is not None and isinstance(value, np.generic):
            _PLAIN.add(kind)  # a numpy scalar type: every value of it pickles


def max_len_identifier() -> int:
    """``TUNE_MAX_LEN_IDENTIFIER``: where Ray cuts ``<trial name>_<experiment_tag>`` in a trial's
    default directory name (130 unless set); read here, in the driver, as Ray's driver reads it."""
    raw = os.environ.get("TUNE_MAX_LEN_IDENTIFIER", "130")
    try:
        return int(raw)
    except ValueError:
        raise ConfigError(f"TUNE_MAX_LEN_IDENTIFIER={raw!r} is not an integer: set it to the number of "
                          "characters a trial directory's name keeps before its date (Ray's default: 130)") from None


__all__ = ["check_callbacks", "check_result", "check_scheduler_objective", "check_trainable", "claim_name",
           "make_run_stopper", "max_len_identifier", "pickled", "required_metrics"]
