"""Ray Tune's environment variables: audition reads some as Ray does, and says so of the others.

A script's environment may set Ray Tune's switches (Ray 2.60's ``ray.tune.constants.TUNE_ENV_VARS``). Those
in ``READ`` work as in Ray. Of the others, those that change what a run does (files written, how trials
stop, how results reach the scheduler) make a run warn, once per process, naming what audition does
instead: a switch that seemed to work but did nothing is the silent difference a port must not meet. Those
that only tune Ray's own machinery (placement groups, the thresholds of Ray's warnings, ``ray.init``'s
automatic call, the controller's refresh period) have nothing to act on here and are left alone.
``TUNE_RESULT_DIR`` and ``RAY_AIR_LOCAL_CACHE_DIR`` make a run raise ``DeprecationWarning``, as Ray's
``tune.run`` does (recorded: Ray 2.60 raises it from every ``fit()``).
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Mapping

from actors._driver.errors import ConfigError

# read as Ray reads them (where: actors._driver.checks, actors.utils, actors._worker, actors._process.children)
READ = ("TUNE_DISABLE_STRICT_METRIC_CHECKING", "TUNE_MAX_LEN_IDENTIFIER", "TUNE_WARN_THRESHOLD_S",
        "TUNE_DISABLE_DATED_SUBDIR", "RAY_CHDIR_TO_TRIAL_DIR", "RAY_kill_child_processes_on_worker_exit")

# set, these change a Ray run; audition does not read them, and says what it does instead
NOT_READ: dict[str, str] = {
    "TUNE_DISABLE_AUTO_CALLBACK_LOGGERS": "each trial's result.json and progress.csv are always written (results, "
                                          "restores and the dashboard read them); RunConfig(callbacks=...) adds "
                                          "loggers of your own",
    "TUNE_DISABLE_SIGINT_HANDLER": "Ctrl-C always stops the run and saves its state, and a second Ctrl-C raises "
                                   "KeyboardInterrupt at once",
    "TUNE_FORCE_TRIAL_CLEANUP_S": "use RunConfig(trial_stop_grace_s=...): how long a stopping trial may take "
                                  "before its process is killed",
    "TUNE_GLOBAL_CHECKPOINT_S": "the experiment's state is saved about every second, and soon after a trial "
                                "pauses, stops or finishes, never sooner than 20x the last save's duration (as "
                                "Ray's automatic period: at most 5% of the time) and at least once a minute",
    "TUNE_MAX_PENDING_TRIALS_PG": "the default generator creates its trials ahead as Ray's default does, another "
                                  "searcher one trial per free slot; TuneConfig(max_concurrent_trials=...) caps "
                                  "running trials",
    "TUNE_RESULT_BUFFER_LENGTH": "a trial's results reach the scheduler one by one, in order, each decided before "
                                 "the next where the scheduler needs it (docs/user-guide.md, decision timing)",
    "TUNE_RESULT_BUFFER_MIN_TIME_S": "see TUNE_RESULT_BUFFER_LENGTH",
    "TUNE_RESULT_BUFFER_MAX_TIME_S": "see TUNE_RESULT_BUFFER_LENGTH",
    "TUNE_RESULT_DELIM": "nested metrics are always flattened with '/' (progress.csv, dataframes)",
    "TUNE_PRINT_ALL_TRIAL_ERRORS": "every failed trial's error is in its error.txt and in Result.error",
    "RAY_TUNE_CALLBACKS": "pass callbacks in RunConfig(callbacks=[...])",
}

# Ray 2.60's tune.run raises DeprecationWarning when either is set (its words, storage_path for audition's)
DEPRECATED = ("TUNE_RESULT_DIR", "RAY_AIR_LOCAL_CACHE_DIR")

_warned: set[str] = set()  # names this process has warned about already


def check_ray_environment(environ: Mapping[str, str] | None = None) -> None:
    """Raise for a variable Ray refuses; warn, once per process, for the set ones audition does not read
    (``environ``: this process's environment unless given)."""
    environ = os.environ if environ is None else environ
    for name in DEPRECATED:
        if environ.get(name):
            raise DeprecationWarning(
                f"The environment variable `{name}` is deprecated. It is no longer used and will not have any "
                "effect. You should set the `storage_path` instead (as in Ray Tune 2.60, which raises this too)")
    found = [n for n in NOT_READ if n in environ and n not in _warned]
    if found:
        _warned.update(found)
        warnings.warn("Ray Tune environment variables that audition does not read are set: "
                      + "; ".join(f"{n} ({NOT_READ[n]})" for n in found), stacklevel=3)


def dated_subdir_disabled(environ: Mapping[str, str] | None = None) -> bool:
    """``TUNE_DISABLE_DATED_SUBDIR``, read as Ray 2.60 reads it (``bool(int(value))``)."""
    raw = (os.environ if environ is None else environ).get("TUNE_DISABLE_DATED_SUBDIR", "0")
    try:
        return bool(int(raw))
    except ValueError:
        raise ConfigError(f"TUNE_DISABLE_DATED_SUBDIR={raw!r}: use 1 (experiments named after the trainable alone) "
                          "or 0 (a date after the name, the default)") from None


__all__ = ["DEPRECATED", "NOT_READ", "READ", "check_ray_environment", "dated_subdir_disabled"]
