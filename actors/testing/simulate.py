"""``simulate``: a whole experiment in one process, deterministic, in simulated time.

The experiment is set up by the same ``Tuner`` code as ``fit()`` (validation, searcher, scheduler,
stopper, the ``ExperimentSpec``) and run by the same ``ExperimentCore``, scheduler host, searcher
and stopper; only the transport, the trials' execution and the clock are simulated
(``SimWorld``, ``SimTrial``). A trial is a learning curve, ``curve(config, iteration) -> dict``::

    from actors import TuneConfig, search
    from actors.schedulers import ASHAScheduler
    from actors.testing import simulate

    def curve(config, i):
        return {"loss": config["lr"] / i, "time_this_iter_s": 10.0}

    sim = simulate(curve, {"lr": search.uniform(0.01, 1.0)},
                   TuneConfig(metric="loss", mode="min", num_samples=20, scheduler=ASHAScheduler(max_t=30)),
                   max_iterations=30, seed=1)
    print(sim.results.get_best_result().config, sim.simulated_time_s)

The seed fixes the configurations drawn (when ``TuneConfig(seed=)`` is not given), the message
interleaving and every drawn fault. Results are written to ``memory://`` storage unless
``RunConfig(storage=...)`` names another place.
"""

from __future__ import annotations

import copy
import dataclasses
import itertools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import cloudpickle

from actors._driver.config import RunConfig, TuneConfig
from actors._driver.result_grid import ResultGrid, grid_of
from actors._driver.trainable import Trainable
from actors._engine.signals import Start
from actors.messages import ExperimentFinished
from actors.testing.faults import Faults, FaultyStore
from actors.testing.sim_history import defer_histories
from actors.testing.sim_store import SimExperimentIO, SimStateWriter, forget_tree, use_sim_storage
from actors.testing.sim_trial import DEFAULT_STEP_S, Curve
from actors.testing.world import SimWorld

_names = itertools.count()
SIM_WRITE_COST_S = 0.0005
# the wall clock (epoch seconds) at a simulation's start: trial directories are dated from it, in UTC
SIM_WALL_START = 1_796_428_800.0


def _curve_step(curve: Curve, config: dict[str, Any], i: int, max_iterations: int | None) -> dict[str, Any]:
    """The result of step ``i``, as the simulated trials report it."""
    metrics = dict(curve(dict(config), i))
    metrics.setdefault("time_this_iter_s", DEFAULT_STEP_S)  # the simulated duration counts, as simulated
    if max_iterations is not None and i >= max_iterations:
        metrics["done"] = True
    return metrics


class CurveTrainable(Trainable):
    """A class trainable that reports ``curve(config, iteration)``: run it with ``fit()`` to compare a
    real experiment with its simulation (``make(curve, max_iterations)`` builds one)."""

    curve: Curve
    max_iterations: int | None = None

    @classmethod
    def make(cls, curve: Curve, max_iterations: int | None = None) -> type[CurveTrainable]:
        name = getattr(curve, "__name__", "curve")
        return type(name if name.isidentifier() else "curve", (cls,),
                    {"curve": staticmethod(curve), "max_iterations": max_iterations})

    def step(self) -> dict[str, Any]:
        return _curve_step(type(self).curve, self.config, self.iteration + 1, self.max_iterations)

    def save_checkpoint(self, checkpoint_dir: str) -> dict[str, Any]:
        return {"iteration": self.iteration}  # the runner resumes the count from the checkpoint


def curve_function(curve: Curve, max_iterations: int | None = None) -> Callable[[dict[str, Any]], None]:
    """A function trainable that reports ``curve(config, iteration)`` and never checkpoints: what
    ``simulate(..., checkpoints=False)`` simulates, to run with ``fit()`` beside it."""

    def run(config: dict[str, Any]) -> None:
        from actors._worker.session import report

        for i in itertools.count(1):
            report(_curve_step(curve, config, i, max_iterations))  # (a done result ends the function)

    name = getattr(curve, "__name__", "curve")
    run.__name__ = run.__qualname__ = name if name.isidentifier() else "curve"
    return run


@dataclass
class Simulation:
    """What ``simulate`` returns."""

    results: ResultGrid | None  # None only if the experiment never reported its end (``hung``)
    error: str | None  # the experiment was aborted (as fit() would raise TuneError with it)
    simulated_time_s: float
    deliveries: int  # messages and notifications handed to the core or a simulated actor
    hung: bool
    hang_reason: str | None
    finished: ExperimentFinished | None
    storage_url: str
    name: str
    world: SimWorld
    # the simulated machine it ran on (``simulate(cpus=..., members=...)``): a restore runs on the same one
    cpus: float | None = None
    members: dict[str, dict[str, float]] | None = None

    @property
    def experiment_path(self) -> str:
        from storage import ExperimentLayout, StorageContext

        ctx = StorageContext(self.storage_url)
        return ctx.uri(ExperimentLayout(ctx, self.name).experiment_dir)

    def discard(self) -> None:
        """Delete what the simulation wrote to ``memory://`` storage (results are unreadable after).
        Until then its files stay in this process's memory (~200 KB for a 20-trial experiment), where every
        later simulation's listings pass over them: a sweep over many seeds discards each run once read, or
        uses ``with simulate(...) as sim:``."""
        from storage import StorageContext

        ctx = StorageContext(self.storage_url)
        if ctx.is_process_local:
            forget_tree(ctx)

    def __enter__(self) -> Simulation:
        return self

    def __exit__(self, *exc: object) -> None:
        self.discard()


def simulate(curve: Curve, param_space: dict[str, Any] | None = None, tune_config: TuneConfig | None = None,
             run_config: RunConfig | None = None, *, seed: int = 0, faults: Faults | None = None,
             max_iterations: int | None = None, cpus: float | None = None,
             members: dict[str, dict[str, float]] | None = None, max_deliveries: int = 1_000_000,
             max_time_s: float = 1e7, idle_limit_s: float = 120.0, restore: str | None = None,
             direct_decisions: bool = True, skip_idle_ticks: bool = True,
             callback_checkpoint_p: float | None = None, checkpoints: bool = True,
             resources: Callable[[dict[str, Any]], Any] | None = None) -> Simulation:
    """Run one experiment in simulated time and return its results (see the module's docstring).

    ``max_iterations``: every trial ends (``done``) at this iteration. ``cpus``: the simulated
    machine's CPUs (default: this machine's, as ``fit()`` sees them), which with the trials'
    resources bounds how many run at once. ``members``: simulate a multi-host run on these members
    (``{"m1": {"cpu": 4}}``), the only case where ``Faults(member_loss=...)`` applies. ``restore``:
    continue the experiment stored there (``Simulation.experiment_path`` of an aborted simulation)
    as ``Tuner.restore`` would, instead of starting one from ``param_space`` and the configs.
    ``direct_decisions``: a plugin that decides every result answers each trial directly, as in a
    multi-process run (``actors/_engine/direct.py``); False: every decision goes through the core,
    as with ``system="simple"``.
    ``skip_idle_ticks``: the controller's once-a-second tick is not delivered while it can do
    nothing (``ExperimentCore.tick_idle``: a long training step, no stopper, nothing due); the
    outcome is the same either way, only ``deliveries`` differs. False delivers every tick.
    ``callback_checkpoint_p``: None, no driver callbacks (the default); a probability: the run has a driver
    ``Callback``, so the controller holds each result batch's decision for the driver's answer, as
    ``fit()`` does, and the callback asks for a checkpoint (``result["should_checkpoint"] = True``) with
    that probability.
    ``checkpoints``: True, trials are ``CurveTrainable``s, which save whenever asked (a pause, a stop that
    saves, ``CheckpointConfig``); False, function trainables that never pass a checkpoint to ``report()``
    (``curve_function``): a paused, retried or restored trial starts over from iteration 1.
    ``resources``: each trial's resources from its config, as ``with_resources(train, resources)`` gives them
    (``lambda config: {"cpu": config["workers"]}``): they decide how many trials run at once on ``cpus`` or
    ``members``. A restore takes the saved trials' resources and the function saved with the experiment.
    """
    from actors._driver.loggers import controller_loggers
    from actors._driver.searcher_setup import seed_driver_stream
    from actors._driver.tuner import Tuner
    from actors._engine.core import ExperimentCore
    from actors._shell.controller import explain

    if not callable(curve):
        raise TypeError(f"simulate(curve=...) takes a function curve(config, iteration) -> dict, got "
                        f"{type(curve).__name__}")
    if max_iterations is not None and (not isinstance(max_iterations, int) or max_iterations < 1):
        raise ValueError(f"simulate(max_iterations={max_iterations!r}): a positive number of iterations")
    faults = faults or Faults()
    tc = tune_config or TuneConfig()
    if tc.seed is None and tc.search_alg is None:
        tc = dataclasses.replace(tc, seed=seed)  # the drawn configurations follow the simulation's seed
    rc = run_config or RunConfig()
    rc = dataclasses.replace(rc, system="simple", name=rc.name or "simulation", verbose=0,
                             storage=rc.storage or f"memory://audition-sim/{next(_names)}")
    trainable = CurveTrainable.make(curve, max_iterations) if checkpoints else curve_function(curve, max_iterations)
    if resources is not None:
        from actors._driver.config import with_resources

        trainable = with_resources(trainable, resources)
    if restore is not None:  # continue a stored experiment (an aborted simulation), as Tuner.restore does
        tuner = Tuner.restore(restore, trainable)
        tc, rc = tuner.tune_config, tuner.run_config
    else:
        tuner = Tuner(trainable, param_space=param_space, tune_config=tc, run_config=rc)
        seed_driver_stream(tuner._searcher, seed)  # (PBT's fills, sample_from functions: fit() takes the script's)
    spec = tuner._spec()
    spec.loggers = controller_loggers(rc.callbacks)
    spec.actor_processes = True  # each simulated trial has a process: liveness checks and kills apply
    spec.log_to_driver = False
    spec.forward_events = spec.callback_gate = callback_checkpoint_p is not None
    if callback_checkpoint_p is not None and not 0.0 <= callback_checkpoint_p <= 1.0:
        raise ValueError(f"simulate(callback_checkpoint_p={callback_checkpoint_p!r}): a probability, 0 to 1")
    need = float(spec.resources_per_trial.get("cpu", 1))
    if members:
        spec.multi_host, spec.leader_resources = True, {}
        spec.max_concurrent = tc.max_concurrent_trials or 1_000_000
    elif cpus is not None:
        slots = max(1, int(cpus // need)) if need > 0 else int(cpus)
        if spec.resources_of is None:  # (each trial's own resources: they decide how many run, not a slot count)
            spec.max_concurrent = min(slots, tc.max_concurrent_trials or slots)
        spec.total_resources = {"cpu": float(cpus)}
    tuner._save_tuner(spec)  # so Tuner.restore can continue an aborted simulation, as after fit()
    spec.progress_reports = False  # (not saved:) the live table is for a console, nobody renders it here

    world = SimWorld(None, curve, seed=seed, faults=faults, max_iterations=max_iterations, members=members,
                     max_deliveries=max_deliveries, max_time_s=max_time_s, idle_limit_s=idle_limit_s,
                     direct=direct_decisions, skip_idle_ticks=skip_idle_ticks,
                     callback_checkpoint_p=callback_checkpoint_p, checkpoints=checkpoints)

    def open_store(s: Any) -> Any:
        # each cost reading advances SIM_WRITE_COST_S: a state write "costs" 2x that, deterministically
        ticks = itertools.count(0.0, SIM_WRITE_COST_S)
        io = SimExperimentIO(s, clock=lambda: world.now, cost_clock=lambda: next(ticks))
        use_sim_storage(io.ctx)  # the same memory:// files, written without fsspec's open() per object
        io.state_writer = SimStateWriter(io.ctx, io.layout)  # each state encoded when it is first read
        defer_histories(io.loggers.loggers, io.ctx, io.layout)  # result.json, progress.csv: the same
        if not s.restore_state:
            io.trial_prefix = f"sim{seed % 100000:05d}"  # trial ids follow the seed too
        return FaultyStore(io, faults, world.rng)

    spec.stopper = _on_simulated_clock(spec.stopper, lambda: world.now)
    world.core = ExperimentCore(spec, open_store, explain, controller_pid=1)
    world.run(Start(SIM_WALL_START))  # simulated wall clock: trial directories' dates are deterministic
    fin = world.finished
    grid = None
    if fin is not None:
        grid = grid_of(fin.trials, tuner._ctx, tuner.name, tc.metric, tc.mode, rc.checkpoint_config,
                       tuner._tagging())
    return Simulation(grid, fin.error if fin else None, world.now, world.deliveries, world.hung,
                      world.hang_reason, fin, tuner._ctx.url, tuner.name, world, cpus=cpus,
                      members=copy.deepcopy(members))


def _on_simulated_clock(stopper: Any, clock: Callable[[], float]) -> Any:
    """A copy of ``stopper`` whose time budgets (``TimeoutStopper``s, ``TuneConfig(time_budget_s)``'s among them)
    count simulated seconds: on the wall clock a simulated run's outcome would depend on the machine's speed.
    A copy, as a real run's controller gets one: the user's stopper keeps its own clock."""
    from actors.stoppers import CombinedStopper, TimeoutStopper

    def walk(s: Any) -> None:
        if isinstance(s, TimeoutStopper):
            s.clock = clock
        elif isinstance(s, CombinedStopper):
            for inner in s.stoppers:
                walk(inner)

    if stopper is None:
        return None
    copied = cloudpickle.loads(cloudpickle.dumps(stopper))  # (a real run's controller unpickles its copy too)
    walk(copied)
    return copied


__all__ = ["CurveTrainable", "Simulation", "curve_function", "simulate"]
