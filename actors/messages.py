"""Every message exchanged between audition's actors (and the driver).

Frozen dataclasses with unique class names: Thespian's ``ActorTypeDispatcher``
dispatches on the bare class name (``receiveMsg_TrialResults``).  Fields are
plain data or classes importable on every host; user objects (trainables,
schedulers, searchers) travel as cloudpickle bytes made in the driver, so an
unpicklable one fails there with a clear error instead of inside the transport.

This module imports nothing from the actor runtime.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from actors._engine.reducer import Decision
from actors._engine.trial import TrialDescription, TrialSnapshot, TrialStatus


class _Message:
    """Base of every message: ``str()`` is just the class name.

    Thespian formats each message with ``str()`` for its (disabled) debug logs on
    every send and receive; a dataclass ``repr`` of a 512-result batch cost ~1 ms
    each time (measured: 21% of the controller's time when batching).
    """

    __slots__ = ()

    def __str__(self) -> str:
        return type(self).__name__


# --------------------------------------------------------------------------- shared values


@dataclass(frozen=True)
class CheckpointRef:
    """A committed checkpoint on storage: its URL, index and the iteration it was taken at."""

    path: str
    index: int
    iteration: int
    time_total_s: float = 0.0
    metrics: dict[str, Any] = field(default_factory=dict)


class ActionKind(Enum):
    """A request a scheduler made through its controller handle (``LOG_POLICY``: a PBT exploit to log)."""

    PAUSE = "pause"
    STOP = "stop"
    RESUME = "resume"
    CHECKPOINT = "checkpoint"
    CLONE = "clone"
    LOG_POLICY = "log_policy"
    # a call of the search algorithm's method (``tune_controller.search_alg.searcher.<method>(*args)``, as
    # Ray's HyperBandForBOHB calls TuneBOHB's on_pause/on_unpause), made in the controller after the hook
    SEARCHER = "searcher"
    # the trial runs with these resources from its next start (``info["resources"]``, audition's dict): Ray's
    # ``trial.update_resources`` from a ResourceChangingScheduler
    RESOURCES = "resources"


class SaveKind(Enum):
    """Why the controller asks a running trial to save: whether Ray 2.60 saves again an iteration
    already checkpointed (``checkpoint_frequency``, or a checkpoint reported with it)."""

    PAUSE = "pause"  # a pause's save (or a scheduler's on a result that pauses): that checkpoint is reused
    CALLBACK = "callback"  # a callback's should_checkpoint: Ray's one save of the result, reused likewise
    SCHEDULER = "scheduler"  # a scheduler asked (PBT's source): saved again, as Ray's _schedule_trial_save

    @property
    def reuses(self) -> bool:
        """An iteration already committed is not saved again: its checkpoint is the answer."""
        return self is not SaveKind.SCHEDULER


@dataclass(frozen=True)
class SchedulerAction:
    """One recorded controller call from inside a scheduler hook."""

    kind: ActionKind
    trial_id: str
    should_checkpoint: bool = True
    source_id: str | None = None
    new_config: dict[str, Any] | None = None
    info: dict[str, Any] | None = None
    # CLONE: if the source's save is in flight, the clone takes the checkpoint it commits (Ray's PBT)
    wait_for_source: bool = False
    save: SaveKind = SaveKind.SCHEDULER  # CHECKPOINT: the kind of save it asks for
    experiment_tag: str | None = None  # CLONE: the trial's new tag (Ray's PBT: ``<tag>@perturbed[...]``)
    method: str = ""  # SEARCHER: the search algorithm's method, called with ``args``
    args: tuple[Any, ...] = ()


class HookKind(Enum):
    """Which scheduler hook a ``SchedulerCall`` runs."""

    ADD = "add"
    RESULT = "result"
    COMPLETE = "complete"
    ERROR = "error"
    REMOVE = "remove"
    CHOOSE = "choose"
    SAVE = "save"


# --------------------------------------------------------------------------- driver <-> controller


@dataclass(frozen=True)
class StartExperiment(_Message):
    """Driver -> controller: run the experiment described by ``spec`` (cloudpickled ExperimentSpec)."""

    spec: bytes


@dataclass(frozen=True)
class TrialSummary:
    """The controller's final word on one trial (histories are read from storage)."""

    trial_id: str
    config: dict[str, Any]
    status: TrialStatus
    last_result: dict[str, Any]
    checkpoint: CheckpointRef | None
    error: str | None
    num_failures: int
    path: str
    name: str | None = None  # TuneConfig(trial_name_creator=...)
    dirname: str | None = None  # its directory's name (trial_dirname_creator's or Ray's); None: the trial id
    experiment_tag: str = ""  # Ray's, as the trial ends (a PBT exploit's perturbed one); "": work it out
    dirname_custom: bool = False  # trial_dirname_creator named it (Ray's Trial.custom_dirname; else None)
    resources: dict[str, float] | None = None  # its resources (its own or the experiment's); None: not known


@dataclass(frozen=True)
class ProgressRow:
    """One trial's line in the live table."""

    trial_id: str
    status: TrialStatus
    config: dict[str, Any]
    iteration: int
    metric: Any
    member: str
    error: str | None = None
    name: str = ""  # Ray Tune's str(trial): the trial_name_creator name, else <trainable>_<trial_id>


@dataclass(frozen=True)
class ExperimentProgress(_Message):
    """Controller -> driver, about once a second: liveness and the status table.

    ``rows`` holds at most ``RunConfig(max_progress_rows)`` trials; ``hidden`` counts the rest per
    status, so the table can say what it leaves out instead of dropping it silently."""

    counts: dict[str, int]
    rows: tuple[ProgressRow, ...]
    elapsed_s: float
    metric: str | None = None
    best: Any = None
    best_trial: str | None = None
    hidden: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class ExperimentFinished(_Message):
    """Controller -> driver: the experiment ended (``error`` set when it was aborted).
    ``event_batches``: how many ``TrialEvents`` were sent, so the driver can wait for all."""

    trials: tuple[TrialSummary, ...]
    error: str | None
    elapsed_s: float
    event_batches: int = 0
    # how many TrialOutputBatch were sent, so the driver prints every trial's last lines
    output_batches: int = 0


@dataclass(frozen=True)
class TrialOutputBatch(_Message):
    """Controller -> driver: trial output lines to echo on the console (``RunConfig(log_to_driver)``),
    gathered from every trial for at most ~50 ms so a chatty experiment costs few messages."""

    chunks: tuple[TrialOutput, ...]


@dataclass(frozen=True)
class AbortExperiment(_Message):
    """Driver -> controller: stop every trial now and report (Ctrl-C, driver error)."""

    reason: str


# --------------------------------------------------------------------------- controller <-> scheduler actor


@dataclass(frozen=True)
class SchedulerSetup(_Message):
    """Controller -> scheduler actor: unpickle and configure the scheduler plugin."""

    scheduler: bytes
    metric: str | None
    mode: str | None
    state: bytes | None = None
    # what Ray's Trial has beyond the controller's snapshot, for the plugin's views of trials:
    # trainable_name (str(trial)), path/local_path (its directory), evaluated_params (its tag's values)
    describe: TrialDescription | None = None
    # call the plugin's set_search_properties(metric, mode) first; False: the driver called it (with Ray's
    # **spec) on the object this is a copy of, and Ray calls it once
    search_properties: bool = True


@dataclass(frozen=True)
class SchedulerReady(_Message):
    """Scheduler actor -> controller: plugin loaded; whether it tolerates batched results."""

    batching_allowed: bool
    name: str
    # hooks the plugin overrides; the controller answers the others itself (no message)
    hooks: frozenset[HookKind] = frozenset(HookKind)
    # the result key the plugin's decision horizons are measured in (Scheduler.horizon_attr); None: none
    horizon_attr: str | None = None
    # where trials on this host may ask for each result's decision directly (a Unix socket path; "":
    # nowhere, every decision goes through the controller). Filled in by the actor shell, never the plugin.
    direct: str = ""
    # the plugin reads the cluster's resources (``SchedulerController.cluster_resources``): each call carries them
    sees_cluster: bool = False


@dataclass(frozen=True)
class SchedulerCall(_Message):
    """Controller -> scheduler actor: run one hook.  ``updates`` refresh the actor's
    mirror of the trial table first, so ``controller.get_trials()`` is current; ``order``, when
    the table's order changed other than by trials added at its end (a retried trial moved to the
    end, as Ray's ``_requeue_trial``; a restored table), is every trial id in the table's order."""

    seq: int
    kind: HookKind
    trial_id: str | None = None
    results: tuple[dict[str, Any], ...] = ()
    updates: tuple[TrialSnapshot, ...] = ()
    order: tuple[str, ...] = ()
    # the cluster's resources in audition's form (every live member's summed), for a plugin that reads them
    # (``SchedulerReady.sees_cluster``); None: unchanged since the last call that carried them
    cluster: dict[str, float] | None = None
    # (trial, source) of the clones the controller could not apply since the last call (the source had no
    # checkpoint to give): the plugin hears of each (``Scheduler.on_clone_skipped``) before this call's hook
    skipped_clones: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class SchedulerReply(_Message):
    """Scheduler actor -> controller: the hook's decision and every controller call it made."""

    seq: int
    kind: HookKind
    trial_id: str | None
    decision: Decision
    actions: tuple[SchedulerAction, ...]
    chosen: str | None = None
    state: bytes | None = None
    # after an ADD or RESULT hook: the trial's decision horizon (Scheduler.decision_horizon); None: none
    horizon: float | None = None
    # RESULT: per result of the call, the flattened result as the hook left it when the hook changed it
    # (Ray's search algorithm is handed the dict the scheduler saw: HyperBandForBOHB adds its budget), else None
    notes: tuple[dict[str, Any] | None, ...] = ()


@dataclass(frozen=True)
class SchedulerFailed(_Message):
    """Scheduler actor -> controller: a hook raised; the experiment cannot go on safely."""

    seq: int
    kind: HookKind
    error: str


# --------------------------------------------------------------------------- direct decisions
# A plugin that decides every result answers the trial's worker itself, over a socket of the
# scheduler actor (two messages on the critical path instead of four Thespian hops); the controller
# joins each decision with the result's batch off that path (actors/_engine/direct.py).


@dataclass(frozen=True)
class DecideResult(_Message):
    """Trial worker -> scheduler actor, over the scheduler's socket: decide this result now.
    ``seq`` numbers the run's requests: one sent again (no answer came in time) is answered again,
    never decided twice."""

    trial_id: str
    run_id: int
    result: dict[str, Any]
    seq: int = 0


@dataclass(frozen=True)
class ResultDecided(_Message):
    """Scheduler actor -> trial worker, over the socket: ``go_on`` (the hook returned CONTINUE and
    asked for nothing), or wait until the controller has applied the decision (``TrialHold``).
    ``seq``: the request's."""

    go_on: bool
    seq: int = 0


@dataclass(frozen=True)
class DirectDecision:
    """One result decided directly: whose, which, and the hook's reply (decision and requests)."""

    trial_id: str
    run_id: int
    iteration: int
    reply: SchedulerReply


@dataclass(frozen=True)
class DecidedResults(_Message):
    """Scheduler actor -> controller: results decided directly with their trials, in decision order."""

    decisions: tuple[DirectDecision, ...]


# --------------------------------------------------------------------------- controller <-> trial actor


@dataclass(frozen=True)
class RunTrial(_Message):
    """Controller -> trial actor: run the trainable from ``checkpoint`` (or from scratch)."""

    trial_id: str
    run_id: int
    config: dict[str, Any]
    trainable: bytes
    checkpoint: CheckpointRef | None
    start_iteration: int
    start_time_total_s: float
    window: int
    storage_url: str
    storage_options: dict[str, Any]
    experiment_name: str
    next_checkpoint_index: int
    checkpoint_frequency: int = 0
    checkpoint_at_end: bool = False
    extra_result: dict[str, Any] = field(default_factory=dict)
    member: str = ""
    # the actor is a process of its own (multi-process systems): capture its fds 1/2, not one thread
    capture_fds: bool = False
    # RunConfig(log_to_driver): also send what the trial prints for the driver's console (TrialOutput)
    echo_output: bool = False
    trial_dirname: str = ""  # its directory's name in the experiment (naming.py); "": its trial id
    # Ray Tune's str(trial), for the prefix of the trial's echoed output lines
    trial_name: str = ""
    # decision horizons (actors/_engine/horizon.py): a result whose ``horizon_attr`` value is below
    # ``horizon`` may be run past before it is decided; "" means every result counts against ``window``
    horizon_attr: str = ""
    horizon: float | None = None
    # ask the scheduler actor at this socket for every result's decision (DecideResult) instead of
    # waiting for the controller's; "": the controller decides (actors/_engine/direct.py)
    decide_at: str = ""
    # the trial's resources (``with_resources`` or ``RunConfig(resources_per_trial=)``, ``{"cpu": 1}``
    # by default), for ``get_context().get_trial_resources()``; empty: not given (the default)
    resources: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class TrialOutput(_Message):
    """Trial actor -> controller: lines the trial printed since the last one, for the driver's console.

    ``lines`` are ``(fd, text)`` with fd 1 (stdout) or 2 (stderr), rate-bounded in the trial's
    process (``actors/_driver/console.py``). Numbered by ``seq`` from 1 per run: the driver restores the
    order (the transport does not keep it)."""

    trial_id: str
    run_id: int
    seq: int
    pid: int
    member: str
    lines: tuple[tuple[int, str], ...]
    name: str = ""  # Ray Tune's str(trial) (RunTrial.trial_name); the prefix falls back to the id


@dataclass(frozen=True)
class TrialResults(_Message):
    """Trial actor -> controller: one or more results in order (a batch), and the
    latest checkpoint committed among them.  ``seq`` numbers every message of one
    run (results, saves, the end) because the TCP transport may reorder them."""

    trial_id: str
    run_id: int
    seq: int
    results: tuple[dict[str, Any], ...]
    checkpoint: CheckpointRef | None
    # committed in this batch before ``checkpoint``: retention and callbacks must see every one
    earlier_checkpoints: tuple[CheckpointRef, ...] = ()


@dataclass(frozen=True)
class TrialProceed(_Message):
    """Controller -> trial actor: batch ``seq`` was scheduled with CONTINUE, and the trial's decision
    horizon as the controller now knows it (``RunTrial.horizon``)."""

    trial_id: str
    run_id: int
    seq: int
    horizon: float | None = None


@dataclass(frozen=True)
class TrialHold(_Message):
    """Controller -> trial actor: a pause is pending; do not run past your next result until every
    result you sent is decided (a trial running ahead of its decisions pauses there, not later)."""

    trial_id: str
    run_id: int


@dataclass(frozen=True)
class TrialSave(_Message):
    """Controller -> trial actor: commit a checkpoint now and answer ``TrialSaved``."""

    trial_id: str
    run_id: int
    kind: SaveKind


@dataclass(frozen=True)
class TrialSaved(_Message):
    """Trial actor -> controller: the save finished (``checkpoint`` None if nothing to save); ``kind``
    is the request's, so the controller calls the hooks Ray calls for that save."""

    trial_id: str
    run_id: int
    seq: int
    checkpoint: CheckpointRef | None
    kind: SaveKind


@dataclass(frozen=True)
class TrialStop(_Message):
    """Controller -> trial actor: end the trainable at its next report and answer ``TrialEnded``."""

    trial_id: str
    run_id: int
    save: bool = False


class EndReason(Enum):
    """Why a trial actor's trainable stopped running."""

    COMPLETED = "completed"
    STOPPED = "stopped"
    FAILED = "failed"


@dataclass(frozen=True)
class TrialEnded(_Message):
    """Trial actor -> controller: the trainable is no longer running."""

    trial_id: str
    run_id: int
    seq: int
    reason: EndReason
    checkpoint: CheckpointRef | None = None
    error: str | None = None
    traceback: str | None = None
    storage_failure: str | None = None  # a permanent storage error: the experiment stops
    output: TrialOutput | None = None  # the run's last printed lines (RunConfig(log_to_driver))
    # the TrialOutput messages the run sent before this one: the controller's end waits for any still on the way
    outputs_sent: int = 0
    # a class trainable's constructor or setup() raised: the trial never came up, so a trial that never
    # reported has only its trial_id in Result.metrics (Ray 2.60: its actor never answered)
    setup_failed: bool = False
    # Ray's auto-filled keys (as TrialProcess.started) taken once the trainable was built (a class after
    # its setup(), where Ray takes them): Result.metrics of a run that never reported; empty: not built
    started: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class TrialProcess(_Message):
    """Trial actor -> controller, at each ``RunTrial``: the OS process running it, so a trial that
    does not stop within ``RunConfig(trial_stop_grace_s)`` can be killed (by the member's probe
    when it runs on another host)."""

    trial_id: str
    run_id: int
    pid: int
    # Ray's auto-filled keys of a run, as the process saw them at its start (date, timestamp, pid,
    # hostname, node_ip): Result.metrics of a trial that never reported (empty: not known)
    started: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ProbeKill(_Message):
    """Controller -> the member probe on the host of a trial process: SIGKILL ``pid``."""

    pid: int


class EventType(Enum):
    """What happened to a trial, for callbacks."""

    ADD = "add"  # created (PENDING): only puts it in the ``trials`` list callbacks get (Ray: add_trial)
    START = "start"
    RESULT = "result"
    CHECKPOINT = "checkpoint"
    COMPLETE = "complete"
    ERROR = "error"
    RECOVER = "recover"  # its run failed and it will be retried (Ray: on_trial_recover)
    # stopped from outside its own results (stop_all, a time budget, fail_fast): TERMINATED in the
    # ``trials`` list, no hook (Ray's _schedule_trial_stop; see actors._engine.halt)
    HALT = "halt"
    # a save that made no new checkpoint (a function trainable paused: its latest one stands); Ray calls
    # on_trial_save without on_checkpoint
    SAVED = "saved"


@dataclass(frozen=True)
class TrialEvent:
    """One thing that happened to one trial."""

    kind: EventType
    trial: TrialSnapshot
    result: dict[str, Any] | None = None
    checkpoint: str | None = None
    # a RESULT the controller holds until the driver's callbacks ran: the driver answers with a
    # CallbackAnswer naming this run and result batch (set on the batch's last result only)
    answer_run: int = 0
    answer_batch: int = 0


@dataclass(frozen=True)
class TrialEvents(_Message):
    """Controller -> driver: a batch of events for callbacks, numbered (the transport may reorder)."""

    seq: int
    events: tuple[TrialEvent, ...]


@dataclass(frozen=True)
class CallbackAnswer(_Message):
    """Driver -> controller: the callbacks' ``on_trial_result`` ran for a held result batch;
    ``checkpoint`` if one of them set ``result["should_checkpoint"] = True`` (Ray Tune's rule)."""

    trial_id: str
    run_id: int
    batch: int
    checkpoint: bool


@dataclass(frozen=True)
class ClusterStatusRequest(_Message):
    """``audition cluster status`` -> controller: describe the members and the trials."""


@dataclass(frozen=True)
class ClusterStatus(_Message):
    """Controller -> ``audition cluster status``: members with their resources, and trial counts."""

    experiment: str | None
    members: tuple[dict[str, Any], ...]
    trials: dict[str, int]


@dataclass(frozen=True)
class ProbeStart(_Message):
    """Controller -> member probe (an actor placed on each member system): heartbeat to me."""

    member_id: str
    interval_s: float


@dataclass(frozen=True)
class ProbeCheck(_Message):
    """Controller -> member probe, at each liveness check while trials run on that member: which of these
    trial processes on your machine are gone? Thespian's notice of a remote trial process's exit can be
    lost, and the controller cannot read another machine's ``/proc``."""

    procs: tuple[tuple[str, int, int], ...]  # (trial_id, run_id, pid)


@dataclass(frozen=True)
class ProbeChecked(_Message):
    """Member probe -> controller: the answer to ``ProbeCheck`` (always sent: a process found gone at one
    check and not at the next was only a slow exit notice)."""

    member_id: str
    gone: tuple[tuple[str, int, int | None], ...]  # (trial_id, run_id, exit status if known)


@dataclass(frozen=True)
class MemberHeartbeat(_Message):
    """Member probe -> controller, every ``interval_s``: this member (host) is alive and reachable.

    Thespian reports a SIGKILLed or cut-off member late or never, so liveness is ours.
    """

    member_id: str
    seq: int


@dataclass(frozen=True)
class ProbeForward(_Message):
    """Test kit -> its probe actor: send ``message`` to ``target`` as if the probe sent it."""

    target: Any
    message: Any


@dataclass(frozen=True)
class ProbeDrain(_Message):
    """Test kit -> its probe actor: hand over every message recorded so far."""


__all__ = [
    "AbortExperiment",
    "ActionKind",
    "CallbackAnswer",
    "CheckpointRef",
    "ClusterStatus",
    "ClusterStatusRequest",
    "DecideResult",
    "DecidedResults",
    "DirectDecision",
    "EndReason",
    "EventType",
    "ExperimentFinished",
    "ExperimentProgress",
    "HookKind",
    "MemberHeartbeat",
    "ProbeCheck",
    "ProbeChecked",
    "ProbeDrain",
    "ProbeForward",
    "ProbeKill",
    "ProbeStart",
    "ProgressRow",
    "ResultDecided",
    "RunTrial",
    "SaveKind",
    "SchedulerAction",
    "SchedulerCall",
    "SchedulerFailed",
    "SchedulerReady",
    "SchedulerReply",
    "SchedulerSetup",
    "StartExperiment",
    "TrialEnded",
    "TrialEvent",
    "TrialEvents",
    "TrialOutput",
    "TrialOutputBatch",
    "TrialProceed",
    "TrialProcess",
    "TrialResults",
    "TrialSave",
    "TrialSaved",
    "TrialStop",
    "TrialSummary",
]
