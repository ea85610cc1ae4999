"""``init``/``shutdown``: what ``ray.init(num_cpus=..., resources=...)`` declares, for audition's runs.

Ray's resources are logical: ``ray.init(num_cpus=1)`` on a many-core machine runs one one-CPU trial at a
time, ``num_cpus=4`` on two cores runs four, and ``resources={"slot": 1}`` lets one trial that asks for a
slot run at a time (recorded from Ray 2.60: ``benchmarks/ray_oracle/record_init_resources.py``). A script
that sets them relies on them, so dropping the call would change how many trials run at once without a
word. audition has no cluster to start (each ``fit()`` starts and stops its own actor system): ``init``
only declares what this machine offers the runs that follow, until ``shutdown()``. Without it a run
offers this machine's cores, as Ray's automatic start does.
"""

from __future__ import annotations

import logging
import math
import os
import warnings
from collections.abc import Mapping
from typing import Any

from actors._driver.errors import ConfigError

log = logging.getLogger(__name__)

_declared: dict[str, float] | None = None  # what init() declared; None: nothing (this machine's cores)

# ray.init's other arguments: what each does in Ray, and what to use in audition instead ("": nothing
# to do, it only configures Ray's own services: dashboard, logging, object store, namespaces, ...)
ADVICE: dict[str, str] = {
    "log_to_driver": "RunConfig(log_to_driver=...) sets whether trial output is echoed",
    "local_mode": "RunConfig(system='simple') runs trials in this process",
    "runtime_env": "trials run in this machine's environment: install packages there and set environment "
                   "variables before fit()",
    "labels": "", "object_store_memory": "", "include_dashboard": "", "dashboard_host": "",
    "dashboard_port": "", "job_config": "", "configure_logging": "", "logging_level": "", "logging_format": "",
    "logging_config": "", "namespace": "", "enable_resource_isolation": "", "cgroup_path": "",
    "system_reserved_cpu": "", "system_reserved_memory": "", "proxy_server_url": "",
}
# the addresses that mean "this machine" to Ray (None: start or find a local cluster)
LOCAL_ADDRESSES = (None, "auto", "local")


def init(address: str | None = None, *, num_cpus: float | None = None, num_gpus: float | None = None,
         resources: Mapping[str, float] | None = None, ignore_reinit_error: bool = False, **kwargs: Any) -> None:
    """Declare this machine's resources for the runs that follow, as ``ray.init`` does (see the module).

    As Ray's: a second call raises ``RuntimeError`` unless ``ignore_reinit_error=True`` (then it changes
    nothing) or ``shutdown()`` came between; an unknown keyword raises ``RuntimeError``; ``resources`` must
    not name CPUs or GPUs. Arguments that configure only Ray's own services are accepted; those whose
    effect audition gets elsewhere (``log_to_driver``, ``local_mode``, ``runtime_env``, another cluster's
    ``address``, GPUs) warn, naming what to use.
    """
    global _declared
    if _declared is not None:
        if ignore_reinit_error:
            log.info("init() called again after it has already been called")
            return
        raise RuntimeError("Maybe you called ray.init twice by accident? This error can be suppressed by "
                           "passing in 'ignore_reinit_error=True' or by calling 'ray.shutdown()' prior to "
                           "'ray.init()'.")
    unknown = [k for k in kwargs if k not in ADVICE and not k.startswith("_")]  # (Ray's private _options)
    if unknown:
        raise RuntimeError(f"Unknown keyword argument(s): {', '.join(unknown)}")
    declared = {"cpu": _amount("num_cpus", num_cpus) if num_cpus is not None else float(machine_cpus())}
    if declared["cpu"] <= 0:
        raise ConfigError(f"init(num_cpus={num_cpus!r}): no trial could ever start (each needs some CPU; Ray "
                          "would wait forever); give at least 1, or leave it out to offer this machine's cores")
    for name, amount in (resources or {}).items():
        if not isinstance(name, str) or not name or name.lower() in ("cpu", "gpu"):
            # (Ray 2.60 raises AssertionError for "CPU" and "GPU", recorded)
            raise ConfigError(f"init(resources={dict(resources or {})!r}): {name!r} cannot be a custom resource; "
                              "use num_cpus (and num_gpus) instead, and resources for the others, such as "
                              "{'slot': 1}")
        declared[name] = _amount(f"resources[{name!r}]", amount)
    advice = [f"{k}=... ({ADVICE[k]})" for k in kwargs if ADVICE.get(k)]
    if address not in LOCAL_ADDRESSES:
        advice.append(f"address={address!r} (audition runs on this machine; across hosts, pass "
                      "RunConfig(system='tcp://HOST:PORT') and start workers there: docs/multi-host.md)")
    if num_gpus:
        advice.append(f"num_gpus={num_gpus!r} (a run on one machine offers no GPUs: a trial that asks for one is "
                      "refused; across hosts, workers advertise them: audition worker --resources '{\"gpu\": 1}')")
    if advice:
        warnings.warn("init(): these have no effect in audition: " + "; ".join(advice), stacklevel=2)
    _declared = declared


def shutdown() -> None:
    """Forget what ``init`` declared (Ray's ``ray.shutdown()``): later runs offer this machine's cores again."""
    global _declared
    _declared = None


def is_initialized() -> bool:
    """Whether ``init`` declared this machine's resources (Ray's ``ray.is_initialized()``)."""
    return _declared is not None


def machine_cpus() -> int:
    """This machine's cores (at least 1)."""
    return max(1, os.cpu_count() or 1)


def machine_resources() -> dict[str, float]:
    """What this machine offers a run: what ``init`` declared, else ``{"cpu": <its cores>}``."""
    return dict(_declared) if _declared is not None else {"cpu": float(machine_cpus())}


def local_slots(need: Mapping[str, float], cap: int | None = None) -> int:
    """How many trials that each need ``need`` run at once on this machine (at most ``cap``); a trial
    that could never start is refused here, naming what it asks for and what the machine offers."""
    offered = machine_resources()
    want = {k: float(v) for k, v in need.items() if v > 0}
    want.setdefault("cpu", 1.0)
    missing = sorted(k for k in want if k not in offered)
    if missing:
        declare = ("" if missing == ["gpu"] else
                   f", or declare them for this machine with init(resources={{{missing[-1]!r}: N}}) as with Ray")
        raise ConfigError(f"each trial asks for {missing} but a single-machine run offers only "
                          f"{sorted(offered)}; run multi-host (RunConfig(system='tcp://HOST:PORT')) with workers "
                          f"that advertise them (audition worker --resources '{{\"gpu\": 1}}'){declare}")
    for name, amount in want.items():
        if amount <= offered[name]:
            continue
        if name == "cpu" and _declared is None:
            raise ConfigError(f"each trial asks for {amount} CPUs but this machine has {offered[name]:g}; lower "
                              "with_resources(..., {'cpu': N}) or add machines")
        what = "num_cpus" if name == "cpu" else f"resources[{name!r}]"
        raise ConfigError(f"each trial asks for {amount:g} of {name!r} but init({what}=...) declared "
                          f"{offered[name]:g} for this machine: no trial could ever start (Ray would wait forever); "
                          "lower with_resources(...) or declare more")
    slots = max(1, min(int(offered[k] // v) for k, v in want.items()))
    return min(slots, cap) if cap else slots


def _amount(what: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise ConfigError(f"init({what}={value!r}): use a finite number >= 0")
    return float(value)


__all__ = ["init", "is_initialized", "local_slots", "machine_cpus", "machine_resources", "shutdown"]
