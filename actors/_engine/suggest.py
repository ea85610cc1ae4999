"""Where trials come from: the search algorithm, asked for a configuration while fewer trials are
pending than Ray Tune's rule wants (``pending_trials_wanted``), each new trial named as it is added.

The core owns one ``TrialSource``; nothing else calls the search algorithm's ``suggest``. Its
``on_trial_result``/``on_trial_complete`` go through ``ask`` too, so a searcher that raises is
named the same way whichever hook it raised in.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from actors._engine.flat import flatten
from actors._engine.hook_view import tagged
from actors._engine.lifecycle import TrialRecord, TrialTable
from actors._engine.naming import TrialNamer
from actors._engine.signals import Start
from actors._engine.spec import ExperimentSpec
from actors._engine.store import SearchProgress
from actors._engine.trial import TrialStatus, tag_of
from actors._engine.verdicts import searcher_failed
from actors.search._searcher import Searcher, innermost
from actors.search._variant import pending_trials_wanted


@dataclass(frozen=True)
class Drawn:
    """A trial just added to the table (named), or the problem that ends the run."""

    record: TrialRecord | None = None
    problem: str | None = None


class TrialSource:
    """The search algorithm's side of the experiment: how many trials it gave, whether it is done."""

    def __init__(self, spec: ExperimentSpec) -> None:
        self.spec = spec
        self.done = False  # no more trials: the searcher said so, num_samples reached, or the run ends
        self.closed = False  # ended for good (SearchProgress.closed): saved, so a restored run draws none
        self.suggested = 0
        # whether the searcher's on_trial_result does anything (the default generator's does not:
        # a result is then neither flattened nor passed, once per result)
        inner = spec.searcher
        while getattr(inner, "transparent", False):  # (the Tuner's ConstantsMerged forwards to the searcher)
            inner = inner.searcher
        self.hears_results = inner is not None and type(inner).on_trial_result is not Searcher.on_trial_result
        self._namer: TrialNamer | None = None
        self.wall_origin = 0.0  # the wall clock (epoch seconds) at the core's time 0
        self.utc_offset_s = 0  # local time's, when the experiment started

    @property
    def progress(self) -> SearchProgress:
        """What the experiment's state saves of the search."""
        return SearchProgress(self.suggested, self.closed)

    def restored(self, progress: SearchProgress, trials: Iterable[TrialRecord], start: Start | None = None,
                 now: float = 0.0) -> str | None:
        """The store was opened: ``progress`` is how far the search went before (nothing on a first run).
        ``start`` (handled at ``now``) has the wall clock, which dates trial directories. Returns the reason the
        experiment must stop (a name creator that fails for a trial the restore restarted), or None."""
        s = self.spec
        self.suggested, self.closed = progress.suggested, progress.closed
        self.done = self.done or progress.closed
        if start is not None:
            self.wall_origin, self.utc_offset_s = start.wall - now, start.utc_offset_s
        trials = list(trials)
        self._namer = TrialNamer(s.trial_name_creator, s.trial_dirname_creator, s.trainable_name, trials,
                                 s.max_len_identifier)
        for rec in trials:
            self._tag(rec)
            if rec.name is None and rec.dirname is None and not rec.opened and not rec.status.is_finished:
                problem = self._namer.apply(rec)  # a trial the restore restarted: Ray's reset() names it anew
                if problem is not None:
                    return problem
        return None

    def _tag(self, rec: TrialRecord) -> None:
        """Ray's ``experiment_tag``, from the config the trial was drawn with (the driver's callbacks
        work out the same one), unless restored with one (a PBT exploit's, ``TrialRecord.tag``)."""
        if not rec.tag:
            rec.tag = tag_of(rec.trial_id, rec.config, self.spec.tag_paths)[0]

    def first_start(self, rec: TrialRecord, now: float) -> str | None:
        """Name the directory of a trial starting for the first time at the core's ``now`` (Ray names it
        then, with the date); the reason the experiment must stop, or None."""
        assert self._namer is not None, "restored() names trials: the store is opened first"
        return self._namer.first_start(rec, self.wall_origin + now, self.utc_offset_s)

    def close(self, for_good: bool = False) -> None:
        """No more trials: every trial is being stopped, or the run is ending. ``for_good``: saved so, as
        Ray's ``set_finished``, which its controller calls for ``stop_all`` and ``fail_fast=True`` and its
        search generator on ``FINISHED``; not for an abort (Ctrl-C, ``fail_fast="raise"``), whose restored
        run goes on drawing, as Ray's."""
        self.done = True
        self.closed = self.closed or for_good

    def ask(self, hook: str, *args: Any) -> tuple[Any, str | None]:
        """Call the search algorithm (user code): its answer, or the message that names it if it raised."""
        try:
            return getattr(self.spec.searcher, hook)(*args), None
        except Exception as exc:
            return None, searcher_failed(self.spec.searcher, hook, exc)

    def tell(self, hook: str, trial_id: str, result: dict[str, Any] | None, *rest: Any,
             tag: str = "", flat: dict[str, Any] | None = None) -> tuple[Any, str | None]:
        """Tell the search algorithm of a trial's result, flattened as Ray Tune hands it over (``ask``'s
        answer; ``flat``: flattened already, as the scheduler's hook left it). As Ray 2.60's (recorded):
        ``on_trial_complete`` gets the trial's last result ending with its ``experiment_tag`` (``tag``), and
        ``None`` for a trial in error (``error=True``)."""
        if hook == "on_trial_complete" and result is not None:
            result = None if rest and rest[0] else tagged(result, tag)
        if flat is None and result is not None:
            flat = flatten(result)
        return self.ask(hook, trial_id, flat, *rest)

    def call(self, method: str, args: tuple[Any, ...]) -> str | None:
        """A scheduler's call of the search algorithm's ``method`` (Ray's ``search_alg.searcher.<method>``):
        None, or the message that ends the run (no such method, or it raised). The wrappers forward it
        (``ConcurrencyLimiter``, as Ray's, and the Tuner's own); the algorithm inside must have it."""
        inner = innermost(self.spec.searcher)
        if not callable(getattr(self.spec.searcher, method, None)) or not callable(getattr(inner, method, None)):
            return (f"the scheduler called the search algorithm's {method}(), which {type(inner).__name__} does "
                    "not have (Ray Tune raises AttributeError there too); give the Tuner a search algorithm that "
                    "has it (HyperBandForBOHB needs TuneConfig(search_alg=TuneBOHB(...)))")
        return self.ask(method, *args)[1]

    def draw(self, table: TrialTable, room: int, trial_prefix: str) -> Drawn | None:
        """Add the next trial to ``table`` if one is wanted now (``room`` trials could start); None
        when none is, for now or for good (then ``done``)."""
        s = self.spec
        if self.done or table.count(TrialStatus.PENDING) >= pending_trials_wanted(
                s.searcher, room, s.total_resources.get("cpu", 1.0)):
            return None
        if self.suggested >= s.num_samples:  # (0: none at all, as Ray's num_samples=0; -1 arrives as sys.maxsize)
            self.done = True
            return None
        trial_id = f"{trial_prefix}_{self.suggested:05d}"
        config, problem = self.ask("suggest", trial_id)
        if problem is not None:
            return Drawn(problem=problem)
        if config is None:  # nothing right now (e.g. its max_concurrent is reached)
            return None
        if not isinstance(config, dict):  # the searcher is finished
            self.close(for_good=True)
            return None
        self.suggested += 1
        rec = table.add(trial_id, config)
        self._tag(rec)
        if s.resources_of is not None:  # (user code, as the searcher's: its failure ends the run, naming it)
            try:
                rec.resources = s.resources_of(dict(config))
            except Exception as exc:
                return Drawn(problem=f"trial {trial_id}: its resources could not be worked out from its config "
                                     f"{config!r}: {type(exc).__name__}: {exc} (the resources function given to "
                                     "with_resources, or default_resource_request, must return a dict such as "
                                     "{'cpu': 2} for every config)")
        assert self._namer is not None, "restored() names trials: the store is opened first"
        problem = self._namer.apply(rec)
        return Drawn(problem=problem) if problem is not None else Drawn(record=rec)
