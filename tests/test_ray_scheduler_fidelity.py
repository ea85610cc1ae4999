"""audition's schedulers make Ray Tune 2.60's decisions on the same result streams.

The streams and Ray's decisions in ``tests/data/ray_scheduler_oracle/`` were recorded by
``benchmarks/ray_oracle/record_scheduler_decisions.py`` (Ray in its own virtualenv; see its
docstring for the event format).  Each stream is replayed, event by event, into audition's
scheduler inside the real scheduler actor (``actors.testing.SchedulerTestKit``) and every
decision is compared: the value ``on_trial_result`` returns, the trials a hook stops, the
trial ``choose_trial_to_run`` picks and, for PBT, who exploits whom and which trials are
checkpointed.  The numeric cases check the pure-Python ``numpy`` statistics bit for bit.
"""

from __future__ import annotations

import json
import math
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from actors._engine.trial import TrialSnapshot, TrialStatus
from actors._legacy import loads as legacy_loads
from actors.messages import ActionKind, HookKind, SchedulerReply
from actors.schedulers import (
    ASHAScheduler,
    HyperBandScheduler,
    MedianStoppingRule,
    PopulationBasedTraining,
    Scheduler,
)
from actors.schedulers._numeric import nanpercentile, np_mean, np_median
from actors.testing import SchedulerTestKit

DATA = Path(__file__).parent / "data" / "ray_scheduler_oracle"
NAMES = ("asha", "median", "hyperband", "pbt")


@cache
def _load(name: str) -> dict[str, Any]:
    return json.loads((DATA / f"{name}.json").read_text())


def _make(name: str, stream: dict[str, Any]) -> Scheduler:
    spec, params = stream["spec"], stream["params"]
    common: dict[str, Any] = {"time_attr": spec["time_attr"], "metric": spec["metric"], "mode": spec["mode"]}
    if name == "asha":
        return ASHAScheduler(**common, **params)
    if name == "median":
        return MedianStoppingRule(**common, **params)
    if name == "hyperband":
        return HyperBandScheduler(**common, **params)
    return PopulationBasedTraining(**common, **params, hyperparam_mutations=spec["mutations"],
                                   log_config=False, seed=stream["seed"])


def _ray_outcome(kind: str, ev: list[Any]) -> Any:
    """Ray's decision for one event, normalised to what audition's engine can express."""
    if kind == "choose":
        return ev[1]
    acts = ev[-1]
    stops = sorted(a[1] for a in acts if a[0] == "stop" and a[1] != ev[1])
    saves = sorted(a[1] for a in acts if a[0] == "save")
    exploit = next(([a[2], a[3]] for a in acts if a[0] == "exploit"), None)  # source, explored config
    if kind != "result":
        return (stops,)
    decision = "CONTINUE" if ev[3] == "NOOP" else ev[3]
    if exploit is not None:  # Ray pauses the trial and swaps its config; audition clones it
        decision = "CONTINUE"
    return (decision, stops, saves, exploit)


def _our_outcome(kind: str, tid: str, reply: SchedulerReply) -> Any:
    if kind == "choose":
        return reply.chosen
    stops = sorted(a.trial_id for a in reply.actions if a.kind is ActionKind.STOP and a.trial_id != tid)
    if kind != "result":
        return (stops,)
    saves = sorted(a.trial_id for a in reply.actions if a.kind is ActionKind.CHECKPOINT)
    exploit = next(([a.source_id, a.new_config] for a in reply.actions if a.kind is ActionKind.CLONE), None)
    return (reply.decision.name, stops, saves, exploit)


def replay(name: str, stream: dict[str, Any], sched: Scheduler | None = None,
           debug: list[str] | None = None) -> tuple[int, list[str]]:
    """Feed one recorded stream to audition's scheduler (``sched``, else built from the stream's
    parameters); (decisions compared, differences). A null time or value is a result without that key.
    ``debug`` gets the scheduler's ``debug_string()`` at the end (of a copy restored from its saved state:
    the kit's scheduler lives in its actor)."""
    spec = stream["spec"]
    time_attr, metric = spec["time_attr"], spec["metric"]
    table: dict[str, TrialSnapshot] = {}
    dirty: dict[str, TrialSnapshot] = {}
    compared, diffs = 0, []

    def update(tid: str, **changes: Any) -> None:
        old = table[tid]
        snap = TrialSnapshot(tid, changes.get("config", old.config), changes.get("status", old.status),
                             old.last_result, 0, changes.get("ckpt", old.checkpoint_iteration))
        table[tid] = dirty[tid] = snap

    def send(kit: SchedulerTestKit, hook: HookKind, tid: str | None, results: tuple[dict[str, Any], ...] = ()
             ) -> SchedulerReply:
        updates = tuple(dirty.values())
        dirty.clear()
        return kit.call(hook, tid, results, updates=updates)

    with SchedulerTestKit(sched if sched is not None else _make(name, stream)) as kit:
        for i, ev in enumerate(stream["events"]):
            kind, tid = ev[0], ev[1]
            if kind == "status":
                update(tid, status=TrialStatus(ev[2]))
                continue
            if kind == "add":
                table[tid] = dirty[tid] = TrialSnapshot(tid, dict(ev[2]), TrialStatus.PENDING)
                send(kit, HookKind.ADD, tid)
                continue
            if kind == "choose":
                reply = send(kit, HookKind.CHOOSE, None)
            elif kind == "remove":
                reply = send(kit, HookKind.REMOVE, tid)
            else:
                t, v = ev[2]
                result = {k: x for k, x in ((time_attr, t), (metric, v)) if x is not None}
                hook = HookKind.RESULT if kind == "result" else HookKind.COMPLETE
                reply = send(kit, hook, tid, (result,))
            ours, theirs = _our_outcome(kind, tid, reply), _ray_outcome(kind, ev)
            compared += 1
            if ours != theirs:
                diffs.append(f"event {i} {ev[:3]}: Ray {theirs}, audition {ours}")
            for a in ev[-1] if kind != "choose" else ():  # the engine's side of Ray's requests
                if a[0] == "exploit":
                    update(a[1], config=a[3])
                elif a[0] == "save":
                    update(a[1], ckpt=1)
            if kind == "result" and ev[3] == "PAUSE":
                update(tid, ckpt=1)
        if debug is not None:
            saved = send(kit, HookKind.SAVE, None).state
            copy = _make(name, stream)
            copy.restore(legacy_loads(saved or b"")["scheduler"])
            debug.append(copy.debug_string())
    return compared, diffs


def _streams(name: str) -> list[tuple[str, int]]:
    return [(name, i) for i in range(len(_load(name)["streams"]))]


_NOT_YET: set[str] = set()


@pytest.mark.parametrize(("name", "index"), [
    pytest.param(*p, marks=[pytest.mark.xfail(strict=True)] if n in _NOT_YET else []) for n in NAMES
    for p in _streams(n)])
def test_same_decisions_as_ray(name: str, index: int) -> None:
    stream = _load(name)["streams"][index]
    debug: list[str] = []
    compared, diffs = replay(name, stream, debug=debug)
    assert compared > 20
    assert debug == [stream["debug"]], (debug, stream["debug"])
    stranded = _RAY_STRANDS.get((name, index), {})
    for event, tid in stranded.items():  # Ray leaves the trial paused for good: the recording ends stuck
        ev = stream["events"]
        assert ev[-1] == ["choose", None], "Ray's run must end with nothing to run"
        assert [e[2] for e in ev if e[0] == "status" and e[1] == tid][-1] == "PAUSED"
        want = f"event {event} {ev[event][:3]}: Ray ([],), audition (['{tid}'],)"
        assert want in diffs, (want, diffs)
        diffs.remove(want)
    assert not diffs, f"{len(diffs)} of {compared} decisions differ from Ray {stream['params']}:\n" + "\n".join(
        diffs[:10])


# Where Ray's HyperBand strands a trial (paused at its milestone, its bracket never processed again:
# Ray's run waits forever), audition's stops it when the last other trial of the bracket leaves
# (docs/schedulers.md, HyperBandScheduler, "Retries"): (scheduler, stream) -> {event: trial stopped}
_RAY_STRANDS: dict[tuple[str, int], dict[int, str]] = {("hyperband", 2): {216: "t17"}}


@pytest.mark.parametrize("index", range(len(_load("asha")["streams"])))
def test_asha_rungs_are_rays(index: int) -> None:
    stream = _load("asha")["streams"][index]
    sched = _make("asha", stream)
    assert isinstance(sched, ASHAScheduler)
    assert [sched.milestones(b) for b in range(stream["params"]["brackets"])] == stream["rungs"]


def _same(a: float, b: float) -> bool:
    return a == b or (math.isnan(a) and math.isnan(b))


def test_nanpercentile_is_numpys_bit_for_bit() -> None:
    cases = _load("numeric")["nanpercentile"]
    assert len(cases) > 100
    wrong = [(xs, q, want, got) for xs, q, want in cases if not _same(got := nanpercentile(xs, q), want)]
    assert not wrong, wrong[:5]


def test_mean_and_median_are_numpys_bit_for_bit() -> None:
    cases = _load("numeric")["mean_median"]
    wrong = [(len(xs), mean, np_mean(xs), med, np_median(xs)) for xs, mean, med in cases
             if np_mean(xs) != mean or np_median(xs) != med]
    assert not wrong, wrong[:5]


# ---------------------------------------------------------------------------------------------------
# The flags that give Ray's behaviour where audition's default differs on purpose (docs/coming-from-ray.md,
# "Scheduler decisions"), replayed against streams recorded from Ray (flags.json).

from actors.search import uniform  # noqa: E402

_FLAGS: dict[str, Any] = {
    # Ray draws each trial's bracket from numpy.random; the recorder seeded it with the stream's seed
    "asha_random": lambda s, c: ASHAScheduler(**c, **s["params"], random_brackets=True, seed=s["seed"]),
    "asha_missing": lambda s, c: ASHAScheduler(**c, **s["params"], skip_missing=True),
    "median_missing": lambda s, c: MedianStoppingRule(**c, **s["params"], skip_missing=True),
    "hyperband_float": lambda s, c: HyperBandScheduler(**c, **s["params"]),
    "pbt_unclipped": lambda s, c: PopulationBasedTraining(
        **c, **s["params"], hyperparam_mutations={k: uniform(lo, hi) for k, (lo, hi) in s["spec"]["domains"].items()},
        log_config=False, seed=s["seed"], clip_perturbations=False),
}


def _flag_stream(kind: str, index: int) -> tuple[dict[str, Any], Scheduler]:
    stream = _load("flags")[kind][index]
    spec = stream["spec"]
    return stream, _FLAGS[kind](stream, {"time_attr": spec["time_attr"], "metric": spec["metric"],
                                         "mode": spec["mode"]})


@pytest.mark.parametrize(("kind", "index"), [(k, i) for k in _FLAGS for i in range(len(_load("flags")[k]))])
def test_flags_give_rays_decisions(kind: str, index: int) -> None:
    stream, sched = _flag_stream(kind, index)
    compared, diffs = replay(kind.split("_")[0], stream, sched)
    assert compared > 20
    assert not diffs, f"{len(diffs)} of {compared} decisions differ from Ray {stream['params']}:\n" + "\n".join(
        diffs[:10])


@pytest.mark.parametrize("index", range(len(_load("flags")["asha_random"])))
def test_random_brackets_are_rays_draws(index: int) -> None:
    stream, sched = _flag_stream("asha_random", index)
    assert isinstance(sched, ASHAScheduler)
    for tid in stream["brackets_of"]:  # in the order Ray added them (the draw needs no controller)
        sched.on_trial_add(None, TrialSnapshot(tid, {}, TrialStatus.PENDING))  # type: ignore[arg-type]
    drawn = {tid: sched.bracket_of(tid) for tid in stream["brackets_of"]}
    assert drawn == stream["brackets_of"]
    assert len(set(drawn.values())) > 1  # really drawn, not all in one bracket


def test_the_flags_change_decisions_on_these_streams() -> None:
    """Without the flags the same streams give other decisions (or errors): the tests above test them."""
    for kind, index in (("asha_random", 0), ("pbt_unclipped", 0), ("asha_missing", 0)):
        stream = _load("flags")[kind][index]
        spec = stream["spec"]
        common = {"time_attr": spec["time_attr"], "metric": spec["metric"], "mode": spec["mode"]}
        if kind == "asha_random":
            plain: Scheduler = ASHAScheduler(**common, **stream["params"])
        elif kind == "pbt_unclipped":
            plain = PopulationBasedTraining(**common, **stream["params"], log_config=False, seed=stream["seed"],
                                            hyperparam_mutations={"lr": uniform(*spec["domains"]["lr"])})
        else:
            plain = ASHAScheduler(**common, **stream["params"])
        try:
            _, diffs = replay(kind.split("_")[0], stream, plain)
        except Exception:  # the missing key stops the default scheduler
            continue
        assert diffs, kind
