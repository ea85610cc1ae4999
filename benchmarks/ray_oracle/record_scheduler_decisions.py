"""Record Ray Tune's scheduler decisions on scripted result streams (the oracle for
``tests/test_ray_scheduler_fidelity.py``).

Run with a Python that has Ray installed, never audition's environment::

    python -m venv /tmp/rayvenv && /tmp/rayvenv/bin/pip install 'ray[tune]==2.60.0'
    /tmp/rayvenv/bin/python benchmarks/ray_oracle/record_scheduler_decisions.py tests/data/ray_scheduler_oracle

It drives Ray's ``ASHAScheduler``, ``HyperBandScheduler``, ``MedianStoppingRule`` and
``PopulationBasedTraining`` directly (no cluster): minimal trial and controller stand-ins
carry what the schedulers read, and a small loop plays Ray's ``TuneController``: it asks
``choose_trial_to_run`` for free slots, feeds one result at a time to ``on_trial_result``,
applies the decision (STOP -> ``on_trial_complete``, PAUSE -> paused, a trial that
reaches its length -> ``on_trial_complete``) and ``stop_trial`` on an idle trial calls
``on_trial_remove``, as ``TuneController.stop_trial`` does.  Every hook call is one
event; the test replays the events into audition's schedulers and compares.

Event format (lists, to keep the files small):

* ``["add", tid, config]``
* ``["result", tid, [time, value], decision, actions]``
* ``["complete", tid, [time, value], actions]`` and ``["remove", tid, actions]``
* ``["choose", chosen_tid_or_None]``
* ``["status", tid, STATUS]`` (the engine changed a status; no hook is called)

``actions`` are the controller calls the hook made: ``["stop", tid]``, ``["pause", tid]``,
``["save", tid]`` and, for PBT, ``["exploit", tid, source_tid, new_config]``.

One deliberate change to Ray: ASHA with several brackets draws each trial's bracket
with ``numpy.random``; audition assigns brackets round-robin (deterministic), so the
recorder overwrites Ray's draw with the round-robin bracket (the rung math is then
compared bracket by bracket); ``flags.json`` keeps Ray's own draw, for
``ASHAScheduler(random_brackets=True, seed=...)`` (see ``flag_streams``).  The numeric cases
at the end record numpy's own ``nanpercentile``/``mean``/``median`` outputs for audition's pure-Python versions.
"""

from __future__ import annotations

import json
import math
import random
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import ray
from ray.tune.schedulers import (
    ASHAScheduler,
    HyperBandScheduler,
    MedianStoppingRule,
    PopulationBasedTraining,
)

FINISHED = ("TERMINATED", "ERROR")


class FakeTrial:
    """What Ray's four schedulers read from a ``Trial`` (identity-hashed, like Trial)."""

    def __init__(self, trial_id: str, config: dict[str, Any]) -> None:
        self.trial_id = trial_id
        self.config = config
        self.status = "PENDING"
        self.last_result: dict[str, Any] = {}
        self.experiment_tag = trial_id
        self.evaluated_params: dict[str, Any] = {}
        self.checkpoint = None
        self.is_saving = False
        self.temporary_state = SimpleNamespace(saving_to=None, restoring_from=None)
        self.run_metadata = SimpleNamespace(checkpoint_manager=SimpleNamespace(
            checkpoint_config=SimpleNamespace(num_to_keep=None), _latest_checkpoint_result=None))
        # simulation state, not read by Ray
        self.pos = 0  # index of the next step
        self.ckpt_pos = 0  # where a restart resumes
        self.ckpt_save_pos = 0  # where a clone of this trial resumes (PBT)
        self.last_point: list[float] = []  # [time, value] of the last result

    def is_finished(self) -> bool:
        return self.status in FINISHED

    def set_experiment_tag(self, tag: str) -> None:
        self.experiment_tag = tag

    def set_config(self, config: dict[str, Any]) -> None:
        self.config = config

    def __repr__(self) -> str:
        return self.trial_id


class Recorder:
    """The event log plus a stand-in for ``TuneController`` as the schedulers use it."""

    def __init__(self, sched: Any) -> None:
        self.sched = sched
        self.trials: list[FakeTrial] = []
        self.events: list[list[Any]] = []
        self._actions: list[list[Any]] = []
        self.search_alg = None

    # -- the controller surface Ray's schedulers call
    def get_trials(self) -> list[FakeTrial]:
        return list(self.trials)

    def get_live_trials(self) -> list[FakeTrial]:
        return [t for t in self.trials if not t.is_finished()]

    def stop_trial(self, t: FakeTrial) -> None:
        self._act(["stop", t.trial_id])
        if t.status in FINISHED:
            return
        if t.status in ("PENDING", "PAUSED"):
            self.hook("remove", t, None, lambda: self.sched.on_trial_remove(self, t))
        else:
            res = t.last_result
            self.hook("complete", t, t.last_point, lambda: self.sched.on_trial_complete(self, t, dict(res)))
        self.set_status(t, "TERMINATED")

    def pause_trial(self, t: FakeTrial, should_checkpoint: bool = True) -> None:
        self._act(["pause", t.trial_id])
        self.set_status(t, "PAUSED")

    def _schedule_trial_save(self, trial: FakeTrial, result: Any = None) -> Any:
        self._act(["save", trial.trial_id])
        return SimpleNamespace(path=f"ckpt-{trial.trial_id}-{trial.pos}", pos=trial.pos)

    # -- recording
    def _act(self, action: list[Any]) -> None:
        if self._actions:
            self._actions[-1].append(action)

    def set_status(self, t: FakeTrial, status: str) -> None:
        if t.status != status:
            t.status = status
            self.events.append(["status", t.trial_id, status])

    def hook(self, kind: str, t: FakeTrial, point: Any, fn: Any) -> Any:
        ev: list[Any] = [kind, t.trial_id] + ([point] if kind != "remove" else [])
        acts: list[Any] = []
        self.events.append(ev)
        self.last_hook = ev
        self._actions.append(acts)
        try:
            out = fn()
        finally:
            self._actions.pop()
        if kind == "result":
            ev.append(out)
        ev.append(acts)
        return out


def _clean(v: float) -> float:
    return float(v)


def simulate(sched: Any, spec: dict[str, Any], seed: int, *, pbt: bool = False,
             round_robin: int = 0) -> dict[str, Any]:
    """Play one stream and return it with Ray's decisions."""
    rng = random.Random(seed)
    random.seed(seed)  # Ray's PBT draws from the global ``random``
    np.random.seed(seed)
    rec = Recorder(sched)
    time_attr, metric, mode = spec["time_attr"], spec["metric"], spec["mode"]
    n, conc = spec["n"], spec["concurrency"]
    sign = 1.0 if mode == "max" else -1.0
    curves: dict[str, list[tuple[float, float]]] = {}
    for i in range(n):
        tid = f"t{i:02d}"
        cfg = {"lr": rng.choice(spec.get("lrs", [0.001, 0.01, 0.1])), "i": i}
        t = FakeTrial(tid, cfg)
        rec.trials.append(t)
        length = rng.randint(spec["min_len"], spec["max_len"])
        dt = rng.choice(spec.get("dts", [1]))
        base, slope, noise = rng.uniform(0, 1), rng.uniform(0.0, 0.5), rng.uniform(0.0, 0.2)
        pts = []
        for k in range(length):
            tt = dt * (k + 1)
            v = base + slope * math.log1p(tt) + rng.gauss(0, noise)
            if spec.get("worsens"):  # each step scores worse, by more than any config's quality
                v = -float(tt)
            v = round(v, 1 if spec.get("ties") else 4)
            if rng.random() < spec.get("nan", 0.0):
                v = math.nan
            pts.append((tt, sign * v))
        curves[tid] = pts
        rec.hook("add", t, cfg, lambda t=t: sched.on_trial_add(rec, t))
        if round_robin:  # audition's deterministic bracket assignment (see the module docstring)
            sched._trial_info[tid] = sched._brackets[i % round_robin]
    steps = 0
    while steps < spec.get("max_steps", 4000):
        while sum(t.status == "RUNNING" for t in rec.trials) < conc:
            pick = sched.choose_trial_to_run(rec)
            rec.events.append(["choose", None if pick is None else pick.trial_id])
            if pick is None:
                break
            pick.pos = pick.ckpt_pos
            rec.set_status(pick, "RUNNING")
            if pick.pos >= len(curves[pick.trial_id]):  # restored at its end: the trainable returns
                rec.stop_trial(pick)
        running = [t for t in rec.trials if t.status == "RUNNING"]
        if not running:
            break
        t = rng.choice(running)
        pts = curves[t.trial_id]
        tt, v = pts[t.pos]
        if pbt and t.config.get("lr"):  # a config's quality shows in its results
            v = round(v + sign * 0.3 * math.log10(t.config["lr"]), 4)
        t.pos += 1
        steps += 1
        result = {time_attr: tt, metric: _clean(v), "training_iteration": t.pos}
        # a result without one of the keys (never a trial's last: completions carry both, as Ray's
        # median rule reads a completed trial's final result later)
        if spec.get("missing") and t.pos < len(pts) and rng.random() < spec["missing"]:
            gone = metric if rng.random() < 0.5 else time_attr
            del result[gone]
            tt, v = (None, v) if gone == time_attr else (tt, None)  # recorded as null
        d = rec.hook("result", t, [tt, v], lambda t=t, r=result: sched.on_trial_result(rec, t, dict(r)))
        ev = rec.last_hook
        t.last_result, t.last_point = result, [tt, v]
        if d == "STOP":
            rec.stop_trial(t)
        elif d == "PAUSE":
            t.ckpt_pos = t.pos
            rec.set_status(t, "PAUSED")
        elif t.status == "PAUSED":  # PBT exploited it: resume from the source's checkpoint
            src = next(a for a in ev[-1] if a[0] == "exploit")
            t.ckpt_pos = rec_trial(rec, src[2]).ckpt_save_pos
        elif t.pos >= len(pts):
            rec.stop_trial(t)  # Ray: the trainable returned -> on_trial_complete
    return {"spec": spec, "seed": seed, "events": rec.events, "debug": sched.debug_string()}


def rec_trial(rec: Recorder, tid: str) -> Any:
    return next(t for t in rec.trials if t.trial_id == tid)


def patch_pbt(sched: PopulationBasedTraining, rec_of: dict[str, Recorder]) -> None:
    """Record PBT's exploits as actions (Ray changes the trial in place, no controller call)."""
    orig = sched._exploit

    def _exploit(tune_controller: Recorder, trial: FakeTrial, trial_to_clone: FakeTrial) -> None:
        orig(tune_controller, trial, trial_to_clone)
        ckpt = sched._trial_state[trial_to_clone].last_checkpoint
        trial_to_clone.ckpt_save_pos = getattr(ckpt, "pos", trial_to_clone.pos)
        tune_controller._act(["exploit", trial.trial_id, trial_to_clone.trial_id, dict(trial.config)])

    sched._exploit = _exploit


def asha_streams() -> list[dict[str, Any]]:
    out = []
    variants = [
        dict(max_t=16, grace_period=1, reduction_factor=2, brackets=1, stop_last_trials=True),
        dict(max_t=64, grace_period=1, reduction_factor=4, brackets=1, stop_last_trials=True),
        dict(max_t=27, grace_period=1, reduction_factor=3, brackets=1, stop_last_trials=False),
        dict(max_t=20, grace_period=2, reduction_factor=2, brackets=3, stop_last_trials=True),
        dict(max_t=30, grace_period=1, reduction_factor=2.5, brackets=2, stop_last_trials=False),
        dict(max_t=100, grace_period=1, reduction_factor=4, brackets=1, stop_last_trials=True),
    ]
    for i, params in enumerate(variants):
        for j, extra in enumerate([{}, {"ties": True}, {"nan": 0.05, "dts": [1, 2, 3]}]):
            mode = "max" if (i + j) % 2 == 0 else "min"
            spec = dict(time_attr="training_iteration", metric="score", mode=mode, n=14 + 3 * j,
                        concurrency=4 + j, min_len=2, max_len=int(params["max_t"]) + 4, **extra)
            spec["time_attr"] = "t" if extra.get("dts") else "training_iteration"
            sched = ASHAScheduler(time_attr=spec["time_attr"], metric="score", mode=mode, **params)
            s = simulate(sched, spec, seed=100 * i + j, round_robin=params["brackets"])
            s["params"] = params
            s["rungs"] = [[m for m, _ in reversed(b._rungs)] for b in sched._brackets]
            out.append(s)
    return out


def median_streams() -> list[dict[str, Any]]:
    out = []
    variants = [
        dict(grace_period=3, min_samples_required=3, min_time_slice=0, hard_stop=True),
        dict(grace_period=1, min_samples_required=2, min_time_slice=0, hard_stop=False),
        dict(grace_period=5, min_samples_required=4, min_time_slice=3, hard_stop=True),
        dict(grace_period=0, min_samples_required=1, min_time_slice=2, hard_stop=False),
    ]
    for i, params in enumerate(variants):
        for j, extra in enumerate([{}, {"ties": True, "dts": [1, 0.5]}, {"nan": 0.04, "dts": [1, 1.5, 2]}]):
            mode = "min" if (i + j) % 2 else "max"
            spec = dict(time_attr="time_total_s", metric="score", mode=mode, n=10 + 2 * j,
                        concurrency=3 + (i % 2), min_len=3, max_len=25, **extra)
            sched = MedianStoppingRule(time_attr="time_total_s", metric="score", mode=mode, **params)
            s = simulate(sched, spec, seed=200 + 10 * i + j)
            s["params"] = params
            out.append(s)
    return out


def hyperband_streams() -> list[dict[str, Any]]:
    out = []
    variants = [
        dict(max_t=9, reduction_factor=3, stop_last_trials=True),
        dict(max_t=16, reduction_factor=2, stop_last_trials=True),
        dict(max_t=27, reduction_factor=3, stop_last_trials=True),
        dict(max_t=10, reduction_factor=2, stop_last_trials=False),
    ]
    for i, params in enumerate(variants):
        for j, extra in enumerate([{}, {"ties": True}, {"min_len": 2}]):
            mode = "max" if (i + j) % 2 == 0 else "min"
            spec = dict(time_attr="training_iteration", metric="score", mode=mode, n=12 + 4 * j,
                        concurrency=2 + j, min_len=int(params["max_t"]) + 2, max_len=int(params["max_t"]) + 6)
            spec.update(extra)
            sched = HyperBandScheduler(time_attr="training_iteration", metric="score", mode=mode, **params)
            s = simulate(sched, spec, seed=300 + 10 * i + j)
            s["params"] = params
            out.append(s)
    return out


def pbt_streams() -> list[dict[str, Any]]:
    out = []
    variants = [
        dict(perturbation_interval=4, quantile_fraction=0.25, resample_probability=0.25),
        dict(perturbation_interval=3, quantile_fraction=0.5, resample_probability=0.0, burn_in_period=5),
        dict(perturbation_interval=5, quantile_fraction=0.25, resample_probability=0.5),
    ]
    for i, params in enumerate(variants):
        for j in range(2):
            mode = "max" if (i + j) % 2 == 0 else "min"
            spec = dict(time_attr="training_iteration", metric="score", mode=mode, n=8 + 4 * j,
                        concurrency=4 + 2 * j, min_len=20, max_len=28,
                        lrs=[0.0001, 0.003 if j else 0.001, 0.01, 0.1, 1.0],  # 0.003: not a mutation value
                        mutations={"lr": [0.0001, 0.001, 0.01, 0.1, 1.0]})
            sched = PopulationBasedTraining(
                time_attr="training_iteration", metric="score", mode=mode,
                hyperparam_mutations={"lr": list(spec["mutations"]["lr"])}, log_config=False, **params)
            patch_pbt(sched, {})
            s = simulate(sched, spec, seed=400 + 10 * i + j, pbt=True)
            s["params"] = params
            out.append(s)
    # exploiting at every step a population whose scores worsen with training, trials outnumbering the
    # slots: Ray goes round in circles (a clone takes its PAUSED source's last_train_time, the tie goes
    # to the trial added first, the sources never run again); the stream ends at max_steps
    for j, mode in enumerate(("min", "max")):
        params = dict(perturbation_interval=1, quantile_fraction=0.5, resample_probability=0.5)
        spec = dict(time_attr="training_iteration", metric="score", mode=mode, n=4 + 2 * j, concurrency=2 + j,
                    min_len=12, max_len=12, max_steps=300, worsens=True, lrs=[0.01, 0.1],
                    mutations={"lr": [0.01, 0.1]})
        sched = PopulationBasedTraining(
            time_attr="training_iteration", metric="score", mode=mode,
            hyperparam_mutations={"lr": list(spec["mutations"]["lr"])}, log_config=False, **params)
        patch_pbt(sched, {})
        s = simulate(sched, spec, seed=470 + j, pbt=True)
        s["params"] = params
        out.append(s)
    return out


def flag_streams() -> dict[str, list[dict[str, Any]]]:
    """Streams for the flags that give Ray's behaviour where audition's default differs on purpose
    (``docs/coming-from-ray.md``, "Scheduler decisions"): ASHA brackets drawn with ``numpy.random``
    (``random_brackets=True, seed=``), results missing the metric or ``time_attr`` skipped
    (``skip_missing=True``), HyperBand with a fractional ``reduction_factor``, PBT perturbations of a
    search domain left unclipped (``clip_perturbations=False``)."""
    from ray import tune

    out: dict[str, list[dict[str, Any]]] = {"asha_random": [], "asha_missing": [], "median_missing": [],
                                            "hyperband_float": [], "pbt_unclipped": []}
    for i, params in enumerate([dict(max_t=20, grace_period=1, reduction_factor=2, brackets=3),
                                dict(max_t=30, grace_period=1, reduction_factor=2.5, brackets=2),
                                dict(max_t=81, grace_period=1, reduction_factor=3, brackets=4)]):
        mode = "max" if i % 2 == 0 else "min"
        spec = dict(time_attr="training_iteration", metric="score", mode=mode, n=24, concurrency=5,
                    min_len=2, max_len=int(params["max_t"]) + 4)
        sched = ASHAScheduler(time_attr="training_iteration", metric="score", mode=mode, **params)
        drawn: dict[str, int] = {}
        add = sched.on_trial_add

        def on_trial_add(controller: Any, trial: Any, add: Any = add, sched: Any = sched,
                         drawn: dict[str, int] = drawn) -> None:
            add(controller, trial)
            drawn[trial.trial_id] = sched._brackets.index(sched._trial_info[trial.trial_id])

        sched.on_trial_add = on_trial_add
        s = simulate(sched, spec, seed=500 + i)  # Ray's own numpy draw, after numpy.random.seed(seed)
        s["params"] = params
        s["brackets_of"] = drawn
        out["asha_random"].append(s)
    for i, params in enumerate([dict(max_t=16, grace_period=1, reduction_factor=2, brackets=1),
                                dict(max_t=27, grace_period=1, reduction_factor=3, brackets=1,
                                     stop_last_trials=False)]):
        mode = "max" if i % 2 == 0 else "min"
        spec = dict(time_attr="training_iteration", metric="score", mode=mode, n=14, concurrency=4, min_len=2,
                    max_len=int(params["max_t"]) + 4, missing=0.15)
        sched = ASHAScheduler(time_attr="training_iteration", metric="score", mode=mode, **params)
        s = simulate(sched, spec, seed=600 + i, round_robin=params["brackets"])
        s["params"] = params
        out["asha_missing"].append(s)
    for i, params in enumerate([dict(grace_period=3, min_samples_required=3, min_time_slice=0, hard_stop=True),
                                dict(grace_period=1, min_samples_required=2, min_time_slice=2, hard_stop=False)]):
        mode = "min" if i % 2 else "max"
        # only the metric goes missing: Ray's rule keeps a completed trial's last result and then
        # reads its time_attr (KeyError) or metric, so completions always carry both keys here
        spec = dict(time_attr="time_total_s", metric="score", mode=mode, n=10, concurrency=3, min_len=3,
                    max_len=20, missing=0.12, dts=[1, 0.5])
        sched = MedianStoppingRule(time_attr="time_total_s", metric="score", mode=mode, **params)
        s = simulate(sched, spec, seed=700 + i)
        s["params"] = params
        out["median_missing"].append(s)
    for i, params in enumerate([dict(max_t=30, reduction_factor=2.5, stop_last_trials=True),
                                dict(max_t=20, reduction_factor=1.5, stop_last_trials=False)]):
        mode = "max" if i % 2 == 0 else "min"
        spec = dict(time_attr="training_iteration", metric="score", mode=mode, n=14, concurrency=3,
                    min_len=int(params["max_t"]) + 2, max_len=int(params["max_t"]) + 6)
        sched = HyperBandScheduler(time_attr="training_iteration", metric="score", mode=mode, **params)
        s = simulate(sched, spec, seed=800 + i)
        s["params"] = params
        out["hyperband_float"].append(s)
    for i, params in enumerate([dict(perturbation_interval=3, quantile_fraction=0.25, resample_probability=0.0),
                                dict(perturbation_interval=4, quantile_fraction=0.5, resample_probability=0.0)]):
        mode = "max" if i % 2 == 0 else "min"
        spec = dict(time_attr="training_iteration", metric="score", mode=mode, n=8, concurrency=4, min_len=20,
                    max_len=28, lrs=[0.1, 0.5, 0.9, 1.0], domains={"lr": [0.05, 1.0]})
        sched = PopulationBasedTraining(
            time_attr="training_iteration", metric="score", mode=mode, log_config=False,
            hyperparam_mutations={"lr": tune.uniform(0.05, 1.0)}, **params)
        patch_pbt(sched, {})
        s = simulate(sched, spec, seed=900 + i, pbt=True)
        s["params"] = params
        out["pbt_unclipped"].append(s)
    return out


def numeric_cases() -> dict[str, Any]:
    rng = random.Random(7)
    pct, means = [], []
    for k in range(150):
        n = rng.choice([1, 2, 3, 4, 5, 7, 9, 16, 33])
        xs = [rng.choice([round(rng.random(), 1), rng.gauss(0, 1), -rng.random()]) for _ in range(n)]
        if k % 7 == 0:
            xs += [math.nan]
        rf = rng.choice([2, 3, 4, 2.5, 1.5])
        q = (1 - 1 / rf) * 100
        pct.append([xs, q, float(np.nanpercentile(xs, q)) if not all(map(math.isnan, xs)) else math.nan])
    for _ in range(40):
        n = rng.choice([1, 2, 5, 8, 9, 15, 16, 17, 33, 129, 140])
        xs = [rng.choice([0.1, rng.random(), rng.gauss(0, 1e3)]) for _ in range(n)]
        means.append([xs, float(np.mean(xs)), float(np.median(xs))])
    for n in (200, 333, 517, 650):  # pairwise summation splits blocks above 128 values
        xs = [round(rng.gauss(0, 1e3), 3) + 0.1 for _ in range(n)]
        means.append([xs, float(np.mean(xs)), float(np.median(xs))])
    return {"nanpercentile": pct, "mean_median": means}


def main() -> None:
    out_dir = Path(sys.argv[1] if len(sys.argv) > 1 else "tests/data/ray_scheduler_oracle")
    out_dir.mkdir(parents=True, exist_ok=True)
    meta = {"ray": ray.__version__, "numpy": np.__version__, "recorder": "benchmarks/ray_oracle/"
            "record_scheduler_decisions.py"}
    for name, make in [("asha", asha_streams), ("median", median_streams),
                       ("hyperband", hyperband_streams), ("pbt", pbt_streams)]:
        streams = make()
        decisions = sum(1 for s in streams for e in s["events"] if e[0] in ("result", "choose"))
        (out_dir / f"{name}.json").write_text(json.dumps({"meta": meta, "streams": streams},
                                                         separators=(",", ":")))
        print(f"{name}: {len(streams)} streams, {decisions} decisions")
    flags = flag_streams()
    (out_dir / "flags.json").write_text(json.dumps({"meta": meta, **flags}, separators=(",", ":")))
    print("flags: " + ", ".join(f"{k} {len(v)} streams" for k, v in flags.items()))
    (out_dir / "numeric.json").write_text(json.dumps({"meta": meta, **numeric_cases()}, separators=(",", ":")))


if __name__ == "__main__":
    main()
