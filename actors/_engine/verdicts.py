"""What a batch of results says before anyone decides on it: a missing metric, a stop criterion met.

Pure functions of the spec and the results, checked first, in Ray Tune's order (the controller
validates metrics, then asks the stopper, and a result either fails makes never reaches the scheduler).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from actors._engine.flat import lookup
from actors._engine.spec import ExperimentSpec
from actors.result import ENGINE_RESULT_KEYS


@dataclass(frozen=True)
class Verdict:
    """A batch judged: the stop criterion's answer per result, whether it stops every trial, or why
    the experiment must stop (``problem``); ``done``: which results the trainable itself reported
    with ``done=True``."""

    hits: tuple[bool, ...]
    stop_all: bool = False
    problem: str | None = None
    done: tuple[bool, ...] = ()

    @property
    def asked(self) -> int:
        """How many of the batch's results the scheduler decides: those before the first that meets a
        stop criterion or says ``done``. Ray Tune decides that one STOP without the scheduler
        (``stopper(...) or trial.should_stop(result)``) and never tells the searcher of it."""
        return next((i for i, hit in enumerate(self.hits) if hit or (i < len(self.done) and self.done[i])),
                    len(self.hits))


def judge(spec: ExperimentSpec, trial_id: str, results: tuple[dict[str, Any], ...]) -> Verdict:
    """Check a batch's metrics, then ask the stopper about every result (no short-circuit), and note
    the results the trainable said were its last."""
    problem = missing_metric(spec, trial_id, results)
    if problem is not None:
        return Verdict((False,) * len(results), problem=problem)
    done = tuple(bool(r.get("done")) for r in results)
    stopper = spec.stopper
    if stopper is None:
        return Verdict((False,) * len(results), done=done)
    try:  # user code: its failure is the user's error, reported as such (not "internal error")
        hits = tuple(bool(stopper(trial_id, r)) for r in results)  # (Ray asks it about a done result too)
        return Verdict(hits, bool(stopper.stop_all()), done=done)
    except Exception as exc:
        return Verdict((False,) * len(results), problem=stopper_failed(stopper, trial_id, exc))


_ABSENT = object()


def missing_metric(spec: ExperimentSpec, trial_id: str, results: tuple[dict[str, Any], ...]) -> str | None:
    """Why a batch cannot be accepted: a result lacks a metric someone needs (checked first, as Ray
    Tune's controller does, so the scheduler never sees such a result)."""
    needed = spec.required_metrics or (((spec.metric, "TuneConfig(metric=...)"),) if spec.metric is not None else ())
    for metric, where in needed:
        for r in results:
            if metric not in r and lookup(r, metric, _ABSENT) is _ABSENT:  # "val/loss": nested, as Ray
                user_keys = sorted(k for k in r if k not in ENGINE_RESULT_KEYS)
                return (f"trial {trial_id} reported a result without the metric {metric!r} (it reported "
                        f"{user_keys}); report {metric!r} in every result or change {where}")
    return None


def stopper_failed(stopper: Any, trial_id: str, exc: Exception) -> str:
    """Why the experiment ends when the ``stop=`` criterion raised."""
    what = type(stopper).__name__
    return (f"the stop criterion RunConfig(stop=...) ({what}) failed on a result of trial {trial_id}: "
            f"{type(exc).__name__}: {exc}. This is an error in stop=, not in audition: make it handle "
            "every result the trainable reports (or report what it reads)")


def searcher_failed(searcher: Any, hook: str, exc: Exception) -> str:
    """Why the experiment ends when the search algorithm raised (user code or its configuration,
    never reported as an internal error of the controller)."""
    while getattr(searcher, "transparent", False):
        searcher = searcher.searcher
    what = type(searcher).__name__
    return (f"the search algorithm {what} failed in {hook}: {type(exc).__name__}: {exc}. This is an error in "
            "the searcher or its configuration (TuneConfig(search_alg=...)), not in audition")


__all__ = ["Verdict", "judge", "missing_metric", "searcher_failed", "stopper_failed"]
