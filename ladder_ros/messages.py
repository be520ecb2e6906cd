"""The documents the graph exchanges, defined once as typed, validated Python values.

Standard message types carry everything they can (images, joint states, poses, actions). What no
standard type carries — episode commands and status, gripper events, privileged simulator state,
verification and planning requests and answers, orchestrator decisions and events, scores, safety
interventions, operator labels, action tags — travels as a message of the graph's own interface
package ``ladder_ros_interfaces`` (docs/interfaces.md, "The messages"). Here each of those exchanges is a
dataclass with a ``doc`` name and its checks (a bad value raises :class:`SchemaError` naming the
document and the field), so the core, the panel and the evaluation handle them without ROS;
:mod:`ladder_ros.interface_conversions` turns them into their messages and back. The payloads reuse
the core's own ``to_dict``/``from_dict`` forms (events, gripper events, goal states, verification
requests and results), so the graph and the reference loop speak about the same objects.

Before the typed interfaces each document travelled as JSON in a ``std_msgs/String``; :func:`encode`
and :func:`decode` (strict: another document kind, an unknown schema version, a missing or unknown
field are refused, naming it) remain for reading recordings made then.

Every per-step document carries the ``episode_id`` and the control ``step`` explicitly, so
lockstep pairing never depends on arrival order or on clocks.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import MISSING, dataclass, field, fields
from typing import Any, ClassVar, TypeVar

import numpy as np

from ladder_ros.core.errors import InvalidInputError
from ladder_ros.core.goals import GoalState
from ladder_ros.core.observation import ContainerInfo, ObjectPose, PrivilegedState
from ladder_ros.core.reset import (
    EPISODE_KINDS,
    EPISODE_STARTS,
    RESET_EPISODE,
    START_AFTER_TASK,
    START_LAYOUT,
    TASK_EPISODE,
)
from ladder_ros.core.task import Subgoal
from ladder_ros.core.triggers import GripperEvents
from ladder_ros.core.verification import VerificationRequest, VerificationResult

SCHEMA_VERSION = 1

# Episode lifecycle states (EpisodeStatus.state).
IDLE = "idle"
RUNNING = "running"
FINISHED = "finished"  # ended by the orchestrator's own rule (plan complete/exhausted, budget)
ABORTED = "aborted"  # ended from outside (operator abort or stop, a node lost)
EPISODE_STATES = (IDLE, RUNNING, FINISHED, ABORTED)

# Episode commands (EpisodeCommand.command).
START = "start"
STOP = "stop"
ABORT = "abort"
EPISODE_COMMANDS = (START, STOP, ABORT)

# Clock modes: the simulator steps only when the step's decisions and action are in (lockstep), or
# the robot runs at its control rate on the wall clock.
LOCKSTEP = "lockstep"
WALL_CLOCK = "wall_clock"
CLOCK_MODES = (LOCKSTEP, WALL_CLOCK)


class SchemaError(InvalidInputError):
    """A document that does not match its schema; the message names the document and the field."""


D = TypeVar("D", bound="Document")


@dataclass(frozen=True)
class Document:
    """Base of every JSON document; subclasses set ``DOC``."""

    DOC: ClassVar[str] = ""

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"doc": self.DOC, "schema_version": SCHEMA_VERSION}
        for f in fields(self):
            data[f.name] = getattr(self, f.name)
        return data

    @classmethod
    def from_dict(cls: type[D], data: Any) -> D:
        if not isinstance(data, dict):
            raise SchemaError(f"{cls.DOC}: expected a JSON object, got {type(data).__name__}")
        if data.get("doc") != cls.DOC:
            raise SchemaError(f"{cls.DOC}: wrong document kind {data.get('doc')!r}")
        version = data.get("schema_version")
        if version != SCHEMA_VERSION:
            raise SchemaError(f"{cls.DOC}: unsupported schema_version {version!r}; this version reads "
                              f"{SCHEMA_VERSION}")
        names = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - names - {"doc", "schema_version"})
        if unknown:
            raise SchemaError(f"{cls.DOC}: unknown field {unknown[0]!r}")
        kwargs = {}
        for f in fields(cls):
            if f.name in data:
                kwargs[f.name] = data[f.name]
            elif f.default is MISSING and f.default_factory is MISSING:
                raise SchemaError(f"{cls.DOC}: missing field {f.name!r}")
        try:
            return cls(**kwargs)
        except SchemaError:
            raise  # already names the document
        except (TypeError, ValueError) as exc:
            raise SchemaError(f"{cls.DOC}: {exc}") from None


def check_field(doc: str, name: str, value: Any, kind: type | tuple, *, optional: bool = False) -> None:
    """Refuse a document field of another type than ``kind`` (a bool is never an int), naming document and field."""
    if value is None and optional:
        return
    kinds = kind if isinstance(kind, tuple) else (kind,)
    if (isinstance(value, bool) and bool not in kinds) or not isinstance(value, kinds):
        names = "/".join(k.__name__ for k in kinds)
        raise SchemaError(f"{doc}: field {name!r} must be {names}, got {type(value).__name__} {value!r}")


def _check_step(doc: str, step: Any) -> None:
    check_field(doc, "step", step, int)
    if step < 0:
        raise SchemaError(f"{doc}: field 'step' must be >= 0, got {step}")


def encode(document: Document) -> str:
    """The document as compact JSON (NaN and infinities are refused: they are not JSON)."""
    return json.dumps(document.to_dict(), separators=(",", ":"), allow_nan=False)


def decode(text: str, cls: type[D]) -> D:
    """Parse ``text`` as a ``cls`` document; raises :class:`SchemaError` naming what is wrong."""
    try:
        data = json.loads(text)
    except (TypeError, ValueError) as exc:
        raise SchemaError(f"{cls.DOC}: not valid JSON ({exc})") from None
    return cls.from_dict(data)


# ------------------------------------------------------------------------------ episodes
# An episode id names a recording folder: letters, digits, '_', '.', '-', starting with a letter or
# a digit (so never '.', '..' or a hidden name), at most 128 characters.
EPISODE_ID_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")


def episode_id_problem(episode_id: str) -> str | None:
    """Why ``episode_id`` cannot name an episode, or None when it can."""
    if not isinstance(episode_id, str) or not EPISODE_ID_PATTERN.fullmatch(episode_id):
        return (f"episode id {episode_id!r} must be 1-128 characters of [A-Za-z0-9_.-] starting with a letter "
                "or a digit")
    return None


@dataclass(frozen=True)
class EpisodeCommand(Document):
    """Start, stop or abort an episode (from the operator panel, the CLI or a test).

    ``start``: ``task_id`` from the orchestrator's suite, ``layout`` and ``seed`` for the simulator
    and the policy, ``variant`` (empty: the orchestrator's ``variant`` parameter), ``policy`` (one of
    the names the policy node serves; empty: its default policy). ``episode_id`` may be empty on
    start (the orchestrator assigns one). ``stop`` ends the running episode as an operator decision;
    ``abort`` ends it as a failure; both need the running episode's id, or empty for "whatever runs
    now".

    ``kind`` and ``start`` (start only; ``ladder_ros/core/reset.py``): a ``task`` episode, or the
    ``reset`` that puts ``task_id``'s scene back into its start regions after the episode
    ``start_after`` (always ``after_task``); a task episode's scene is built from its ``layout``, or
    continued as it is from the scene the episode ``start_after`` left (``after_reset``,
    ``after_task``): nothing is teleported.
    """

    DOC: ClassVar[str] = "episode_command"
    command: str
    episode_id: str = ""
    task_id: str = ""
    layout: int = 0
    seed: int = 0
    variant: str = ""
    reason: str = ""
    policy: str = ""
    kind: str = TASK_EPISODE
    start: str = START_LAYOUT
    start_after: str = ""

    def __post_init__(self) -> None:
        if self.command not in EPISODE_COMMANDS:
            raise SchemaError(f"{self.DOC}: unknown command {self.command!r}; valid: {', '.join(EPISODE_COMMANDS)}")
        for name in ("episode_id", "task_id", "variant", "reason", "policy", "kind", "start", "start_after"):
            check_field(self.DOC, name, getattr(self, name), str)
        for name in ("layout", "seed"):
            check_field(self.DOC, name, getattr(self, name), int)
        if self.layout < 0:
            raise SchemaError(f"{self.DOC}: layout must be >= 0, got {self.layout}")
        if self.command == START and not self.task_id:
            raise SchemaError(f"{self.DOC}: a start command names a task_id")
        _check_start(self.DOC, self.kind, self.start, self.start_after)

    @property
    def is_reset(self) -> bool:
        return self.kind == RESET_EPISODE


def _check_start(doc: str, kind: str, start: str, start_after: str) -> None:
    """An episode's kind and start (``ladder_ros/core/reset.py``), and the episode it continues from."""
    if kind not in EPISODE_KINDS:
        raise SchemaError(f"{doc}: unknown kind {kind!r}; valid: {', '.join(EPISODE_KINDS)}")
    if start not in EPISODE_STARTS:
        raise SchemaError(f"{doc}: unknown start {start!r}; valid: {', '.join(EPISODE_STARTS)}")
    if (start == START_LAYOUT) != (not start_after):
        raise SchemaError(f"{doc}: start {start!r} names the episode it continues from (start_after) exactly when "
                          f"it continues from one, got start_after={start_after!r}")
    if kind == RESET_EPISODE and start != START_AFTER_TASK:
        raise SchemaError(f"{doc}: a reset continues from the scene of the task episode it follows (start "
                          f"{START_AFTER_TASK!r} and that episode as start_after), got start {start!r}")


@dataclass(frozen=True)
class EpisodeStatus(Document):
    """The orchestrator's episode, latched: what runs, its plan and clock, and at the end its result.

    ``origin_ns`` is the time stamp of step 0; step ``t`` is stamped ``origin_ns + t / rate_hz``
    (lockstep: simulated time, which never runs backwards across episodes; wall clock: the robot's
    time). ``result`` is the episode record (events, orchestrator summary, and in simulation the
    privileged score) once the episode is over. ``policy`` is the named policy the episode runs
    under and ``policy_config_hash`` its config's digest (empty while idle, and from an orchestrator
    that knows no names). ``kind``, ``start`` and ``start_after`` are the start command's: a reset
    episode, or one whose scene continues from an earlier one's (the sim bridge and the twin keep the
    scene as it is instead of building the layout).
    """

    DOC: ClassVar[str] = "episode_status"
    episode_id: str
    state: str
    seq: int = 0
    task: dict | None = None
    variant: str = ""
    preset: str = ""
    layout: int = 0
    seed: int = 0
    plan: list = field(default_factory=list)
    budget_steps: int = 0
    clock: str = LOCKSTEP
    rate_hz: float = 0.0
    origin_ns: int = 0
    step: int = -1
    plan_index: int | None = None
    instruction: str | None = None
    pending_request: int | None = None
    verifier_available: bool = True
    finish_reason: str | None = None
    result: dict | None = None
    message: str = ""
    waiting_for: str = ""  # the input the episode has waited for too long (stall watchdog); empty: none
    policy: str = ""
    policy_config_hash: str = ""
    kind: str = TASK_EPISODE
    start: str = START_LAYOUT
    start_after: str = ""

    def __post_init__(self) -> None:
        if self.state not in EPISODE_STATES:
            raise SchemaError(f"{self.DOC}: unknown state {self.state!r}; valid: {', '.join(EPISODE_STATES)}")
        if self.clock not in CLOCK_MODES:
            raise SchemaError(f"{self.DOC}: unknown clock {self.clock!r}; valid: {', '.join(CLOCK_MODES)}")
        for name in ("episode_id", "policy", "policy_config_hash", "kind", "start", "start_after"):
            check_field(self.DOC, name, getattr(self, name), str)
        _check_start(self.DOC, self.kind, self.start, self.start_after)
        check_field(self.DOC, "task", self.task, dict, optional=True)
        check_field(self.DOC, "plan", self.plan, list)
        check_field(self.DOC, "origin_ns", self.origin_ns, int)
        check_field(self.DOC, "rate_hz", self.rate_hz, (int, float))
        check_field(self.DOC, "result", self.result, dict, optional=True)

    @property
    def keeps_scene(self) -> bool:
        """The episode starts from the scene an earlier one left, as it is (not built from its layout)."""
        return self.start != START_LAYOUT

    def step_stamp_ns(self, step: int) -> int:
        """The time stamp of control step ``step`` of this episode."""
        return stamp_of_step(self.origin_ns, self.rate_hz, step)

    def step_of_stamp(self, stamp_ns: int) -> int | None:
        """The control step stamped ``stamp_ns``, or None when it is not one of this episode's steps."""
        return step_of_stamp(self.origin_ns, self.rate_hz, stamp_ns)


def stamp_of_step(origin_ns: int, rate_hz: float, step: int) -> int:
    return int(origin_ns) + int(round(step * 1e9 / rate_hz))


def step_of_stamp(origin_ns: int, rate_hz: float, stamp_ns: int) -> int | None:
    """Inverse of :func:`stamp_of_step`; None for a stamp before the origin or between steps."""
    if rate_hz <= 0 or stamp_ns < origin_ns:
        return None
    step = int(round((stamp_ns - origin_ns) * rate_hz / 1e9))
    return step if stamp_of_step(origin_ns, rate_hz, step) == stamp_ns else None


# ------------------------------------------------------------------------------ per step
@dataclass(frozen=True)
class GripperEventsDoc(Document):
    """The gripper monitor's events of one step (``GripperEvents.to_dict``)."""

    DOC: ClassVar[str] = "gripper_events"
    episode_id: str
    step: int
    stamp_ns: int
    events: dict

    def __post_init__(self) -> None:
        _check_step(self.DOC, self.step)
        check_field(self.DOC, "events", self.events, dict)
        if self.events.get("step") != self.step:
            raise SchemaError(f"{self.DOC}: events are of step {self.events.get('step')!r}, not {self.step}")
        self.gripper_events()  # a malformed payload fails at decode, with the document's name

    @classmethod
    def of(cls, episode_id: str, stamp_ns: int, events: GripperEvents) -> "GripperEventsDoc":
        return cls(episode_id=episode_id, step=events.step, stamp_ns=int(stamp_ns), events=events.to_dict())

    def gripper_events(self) -> GripperEvents:
        try:
            return GripperEvents.from_dict(self.events)
        except (KeyError, TypeError, ValueError) as exc:
            raise SchemaError(f"{self.DOC}: malformed events ({exc!r})") from None


def _vector(doc: str, name: str, value: Any, length: int) -> np.ndarray:
    if not isinstance(value, list) or len(value) != length:
        raise SchemaError(f"{doc}: {name} must be a list of {length} numbers, got {value!r}")
    arr = np.asarray(value, dtype=np.float64)
    if not np.all(np.isfinite(arr)):
        raise SchemaError(f"{doc}: {name} has non-finite entries: {value!r}")
    return arr


def _floats(values: Any) -> list[float]:
    """A float64 vector as a list of Python floats: JSON writes them with repr, so they read back exactly."""
    return [float(v) for v in np.asarray(values, dtype=np.float64).ravel()]


def _destinations(destinations) -> dict:
    """Containers or start regions (:class:`ContainerInfo` by name) as a document writes them."""
    return {name: {"position": _floats(c.position), "half_extents": _floats(c.half_extents),
                   "surface_z": float(c.surface_z)} for name, c in destinations.items()}


@dataclass(frozen=True)
class PrivilegedStateDoc(Document):
    """What only the simulator knows at one step: the privileged verifier's, the oracle's, scoring's and
    the scripted expert's input. Never sent on a robot.

    ``goal`` is the scene's :class:`GoalState`; ``goal_states`` the goal tracker's per-subgoal
    predicates in plan order; ``objects``/``containers``/``grasped`` the :class:`PrivilegedState`;
    ``ee_euler`` and ``target_position`` the simulator's exact end-effector orientation and
    controller target (the standard ``ee_pose`` carries a quaternion, whose round trip through
    Euler angles is not bit-exact; lockstep parity needs the exact values). ``regions`` are the scene's
    start regions as flat destinations (``PrivilegedState.regions``): where the scripted expert puts an
    object a reset sends back, and what the goal's counts in a region refer to.
    """

    DOC: ClassVar[str] = "privileged_state"
    episode_id: str
    step: int
    stamp_ns: int
    goal: dict
    goal_states: list
    objects: dict = field(default_factory=dict)
    containers: dict = field(default_factory=dict)
    grasped: list = field(default_factory=list)
    ee_euler: list | None = None
    target_position: list | None = None
    regions: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        _check_step(self.DOC, self.step)
        check_field(self.DOC, "goal", self.goal, dict)
        check_field(self.DOC, "regions", self.regions, dict)
        check_field(self.DOC, "goal_states", self.goal_states, list)
        if not all(isinstance(g, bool) for g in self.goal_states):
            raise SchemaError(f"{self.DOC}: goal_states must be booleans, got {self.goal_states!r}")

    @classmethod
    def of(cls, episode_id: str, step: int, stamp_ns: int, privileged: PrivilegedState,
           goal_states: tuple[bool, ...], ee_euler: np.ndarray | None = None,
           target_position: np.ndarray | None = None) -> "PrivilegedStateDoc":
        return cls(
            episode_id=episode_id, step=int(step), stamp_ns=int(stamp_ns),
            goal=privileged.goal.to_dict(), goal_states=[bool(g) for g in goal_states],
            objects={name: {"kind": o.kind, "position": _floats(o.position), "quaternion": _floats(o.quaternion)}
                     for name, o in privileged.objects.items()},
            containers=_destinations(privileged.containers),
            grasped=list(privileged.grasped),
            ee_euler=None if ee_euler is None else _floats(ee_euler),
            target_position=None if target_position is None else _floats(target_position),
            regions=_destinations(privileged.regions),
        )

    def goal_state(self) -> GoalState:
        try:
            return GoalState.from_dict(self.goal)
        except (TypeError, ValueError) as exc:
            raise SchemaError(f"{self.DOC}: malformed goal ({exc!r})") from None

    def privileged_state(self) -> PrivilegedState:
        objects = {}
        for name, o in self.objects.items():
            objects[name] = ObjectPose(kind=str(o["kind"]),
                                       position=_vector(self.DOC, f"objects.{name}.position", o["position"], 3),
                                       quaternion=_vector(self.DOC, f"objects.{name}.quaternion", o["quaternion"], 4))
        return PrivilegedState(goal=self.goal_state(), objects=objects,
                               containers=self._destination_infos("containers", self.containers),
                               grasped=tuple(str(g) for g in self.grasped),
                               regions=self._destination_infos("regions", self.regions))

    def _destination_infos(self, what: str, data: dict) -> dict[str, ContainerInfo]:
        found = {}
        for name, c in data.items():
            surface = c["surface_z"]
            if isinstance(surface, bool) or not isinstance(surface, (int, float)) or not math.isfinite(surface):
                raise SchemaError(f"{self.DOC}: {what}.{name}.surface_z must be a finite number, got {surface!r}")
            found[name] = ContainerInfo(
                name=name, position=_vector(self.DOC, f"{what}.{name}.position", c["position"], 3),
                half_extents=np.asarray(c["half_extents"], dtype=np.float64), surface_z=float(surface))
        return found

    def ee_euler_array(self) -> np.ndarray | None:
        return None if self.ee_euler is None else _vector(self.DOC, "ee_euler", self.ee_euler, 3)

    def target_position_array(self) -> np.ndarray | None:
        if self.target_position is None:
            return None
        return _vector(self.DOC, "target_position", self.target_position, 3)


@dataclass(frozen=True)
class DecisionDoc(Document):
    """The orchestrator's final word on one step: the instruction the policy follows from it.

    In lockstep it is published once the step's decisions are complete, including the answer to a
    verification query of that step; the policy acts only on (observation t, decision t) pairs and
    the simulator steps only after both. ``finished`` means: no action for this step, hold still.
    ``summary`` is the orchestrator's queue bookkeeping (``Orchestrator.summary``) on the last step.
    """

    DOC: ClassVar[str] = "decision"
    episode_id: str
    step: int
    stamp_ns: int
    instruction: str | None
    plan_index: int | None = None
    finished: bool = False
    finish_reason: str | None = None
    pending_request: int | None = None
    summary: dict | None = None

    def __post_init__(self) -> None:
        _check_step(self.DOC, self.step)
        check_field(self.DOC, "instruction", self.instruction, str, optional=True)
        check_field(self.DOC, "finished", self.finished, bool)
        if not self.finished and self.instruction is None:
            raise SchemaError(f"{self.DOC}: a decision that is not finished names an instruction")


@dataclass(frozen=True)
class VerificationRequestDoc(Document):
    """A count query (``VerificationRequest.to_dict``) about the observation of ``step``."""

    DOC: ClassVar[str] = "verification_request"
    episode_id: str
    step: int
    stamp_ns: int
    request: dict

    def __post_init__(self) -> None:
        _check_step(self.DOC, self.step)
        check_field(self.DOC, "request", self.request, dict)
        self.verification_request()  # a malformed payload fails at decode, with the document's name

    @classmethod
    def of(cls, episode_id: str, stamp_ns: int, request: VerificationRequest) -> "VerificationRequestDoc":
        return cls(episode_id=episode_id, step=request.step, stamp_ns=int(stamp_ns), request=request.to_dict())

    def verification_request(self) -> VerificationRequest:
        try:
            return VerificationRequest.from_dict(self.request)
        except (KeyError, TypeError, ValueError) as exc:
            raise SchemaError(f"{self.DOC}: malformed request ({exc!r})") from None


@dataclass(frozen=True)
class VerificationResultDoc(Document):
    """The verifier's answer (``VerificationResult.to_dict``) to the query of ``step``."""

    DOC: ClassVar[str] = "verification_result"
    episode_id: str
    step: int
    result: dict

    def __post_init__(self) -> None:
        _check_step(self.DOC, self.step)
        check_field(self.DOC, "result", self.result, dict)
        self.verification_result()  # a malformed payload fails at decode, with the document's name

    @classmethod
    def of(cls, episode_id: str, step: int, result: VerificationResult) -> "VerificationResultDoc":
        return cls(episode_id=episode_id, step=int(step), result=result.to_dict())

    def verification_result(self) -> VerificationResult:
        try:
            return VerificationResult.from_dict(self.result)
        except (KeyError, TypeError, ValueError) as exc:
            raise SchemaError(f"{self.DOC}: malformed result ({exc!r})") from None


@dataclass(frozen=True)
class PlanRequestDoc(Document):
    """Plan ``instruction`` from the observation of ``step`` (the episode's first frame)."""

    DOC: ClassVar[str] = "plan_request"
    episode_id: str
    step: int
    stamp_ns: int
    instruction: str

    def __post_init__(self) -> None:
        _check_step(self.DOC, self.step)
        check_field(self.DOC, "stamp_ns", self.stamp_ns, int)
        check_field(self.DOC, "instruction", self.instruction, str)
        if not self.instruction.strip():
            raise SchemaError(f"{self.DOC}: field 'instruction' must not be empty")


@dataclass(frozen=True)
class PlanResultDoc(Document):
    """The planner's answer: its subgoals (``Subgoal.to_dict`` each), or none and why, with the raw reply."""

    DOC: ClassVar[str] = "plan_result"
    episode_id: str
    subgoals: list | None
    error: str | None = None
    raw_reply: str | None = None
    source: str = ""
    latency_ms: float = 0.0
    usage: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        check_field(self.DOC, "subgoals", self.subgoals, list, optional=True)
        check_field(self.DOC, "error", self.error, str, optional=True)
        check_field(self.DOC, "raw_reply", self.raw_reply, str, optional=True)
        check_field(self.DOC, "latency_ms", self.latency_ms, (int, float))
        check_field(self.DOC, "usage", self.usage, dict)

    def plan(self) -> list[Subgoal]:
        """The subgoals as core objects; an empty or missing plan raises naming why."""
        if self.subgoals is None:
            raise SchemaError(f"{self.DOC}: no plan ({self.error or 'no reason given'})")
        if not self.subgoals:
            raise SchemaError(f"{self.DOC}: the planner returned an empty plan")
        try:
            return [Subgoal.from_dict(s) for s in self.subgoals]
        except (KeyError, TypeError, ValueError) as exc:
            raise SchemaError(f"{self.DOC}: malformed subgoal ({exc})") from None


@dataclass(frozen=True)
class EpisodeEventDoc(Document):
    """One orchestrator event (``Event.to_dict``), in the order the orchestrator emitted them."""

    DOC: ClassVar[str] = "episode_event"
    episode_id: str
    index: int
    event: dict

    def __post_init__(self) -> None:
        check_field(self.DOC, "index", self.index, int)
        check_field(self.DOC, "event", self.event, dict)


@dataclass(frozen=True)
class EpisodeScoreDoc(Document):
    """The privileged score of a finished episode, computed by the sim bridge (simulation only).

    ``score`` holds ``success``, ``subgoals_done``, ``subgoals`` (outcomes), ``violations``,
    ``final_goal`` and ``steps_used``, the same fields the reference loop's episode record has.
    """

    DOC: ClassVar[str] = "episode_score"
    episode_id: str
    step: int
    score: dict

    def __post_init__(self) -> None:
        _check_step(self.DOC, self.step)
        check_field(self.DOC, "score", self.score, dict)


# ------------------------------------------------------------------------------ operator labels
# Operator labels (EpisodeLabels): a subgoal is done or not done; an episode a success, a failure or
# partial (some subgoals done, the task not).
DONE = "done"
NOT_DONE = "not_done"
SUBGOAL_LABELS = (DONE, NOT_DONE)
SUCCESS = "success"
FAILURE = "failure"
PARTIAL = "partial"
EPISODE_LABELS = (SUCCESS, FAILURE, PARTIAL)


@dataclass(frozen=True)
class EpisodeLabels(Document):
    """The operator's labels of one episode, the whole set on every change (the last revision wins).

    ``subgoals`` maps a plan index (as a decimal string: JSON keys are strings) to ``done`` or
    ``not_done``; ``episode`` is ``success``, ``failure``, ``partial`` or None (not labelled yet);
    ``note`` is free text. ``revision`` counts the changes; ``history`` keeps every change as it was
    made (``{"revision", "unix_s", "what", "value"}``), so nothing an operator once said is lost.
    ``final`` says the operator is done with the episode (the recorder may then close its bag).
    """

    DOC: ClassVar[str] = "episode_labels"
    episode_id: str
    revision: int = 0
    subgoals: dict = field(default_factory=dict)
    episode: str | None = None
    note: str = ""
    operator: str = ""
    final: bool = False
    updated_unix_s: float = 0.0
    history: list = field(default_factory=list)

    def __post_init__(self) -> None:
        check_field(self.DOC, "episode_id", self.episode_id, str)
        if not self.episode_id:
            raise SchemaError(f"{self.DOC}: field 'episode_id' must not be empty")
        check_field(self.DOC, "revision", self.revision, int)
        if self.revision < 0:
            raise SchemaError(f"{self.DOC}: field 'revision' must be >= 0, got {self.revision}")
        check_field(self.DOC, "subgoals", self.subgoals, dict)
        for key, value in self.subgoals.items():
            if not isinstance(key, str) or not key.isdigit():
                raise SchemaError(f"{self.DOC}: subgoal keys are plan indices as decimal strings, got {key!r}")
            if value not in SUBGOAL_LABELS:
                raise SchemaError(f"{self.DOC}: subgoal {key} label must be one of {', '.join(SUBGOAL_LABELS)}, "
                                  f"got {value!r}")
        if self.episode is not None and self.episode not in EPISODE_LABELS:
            raise SchemaError(f"{self.DOC}: episode label must be one of {', '.join(EPISODE_LABELS)} or null, "
                              f"got {self.episode!r}")
        check_field(self.DOC, "note", self.note, str)
        check_field(self.DOC, "operator", self.operator, str)
        check_field(self.DOC, "final", self.final, bool)
        check_field(self.DOC, "updated_unix_s", self.updated_unix_s, (int, float))
        check_field(self.DOC, "history", self.history, list)

    def subgoal_label(self, plan_index: int) -> str | None:
        """``done``, ``not_done`` or None (not labelled) for the subgoal at ``plan_index``."""
        return self.subgoals.get(str(int(plan_index)))


@dataclass(frozen=True)
class EpisodeCommandReply(Document):
    """The orchestrator's answer to one :class:`EpisodeCommand`: accepted or refused, and why.

    A refused start never touches the episode status (which belongs to the running or last
    episode); the reply carries the command's ``episode_id`` (empty when it named none) and, for an
    accepted start, the id the episode runs under (``assigned_id``).
    """

    DOC: ClassVar[str] = "episode_command_reply"
    command: str
    episode_id: str
    accepted: bool
    reason: str = ""
    assigned_id: str = ""

    def __post_init__(self) -> None:
        for name in ("command", "episode_id", "reason", "assigned_id"):
            check_field(self.DOC, name, getattr(self, name), str)
        check_field(self.DOC, "accepted", self.accepted, bool)


@dataclass(frozen=True)
class SafetyInterventionDoc(Document):
    """One action the safety filter refused (``ladder_ros.core.safety``): what, why, and the episode's counts.

    Published by whoever applies actions (the sim bridge; on a robot the driver's safety filter);
    ``counts`` are the episode's intervention counts so far, by kind, so the last document of an
    episode carries its totals.
    """

    DOC: ClassVar[str] = "safety_intervention"
    episode_id: str
    step: int
    source: str
    kind: str
    reason: str
    axis: str | None = None
    value: float | None = None
    limit: float | None = None
    counts: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        _check_step(self.DOC, self.step)
        for name in ("episode_id", "source", "kind", "reason"):
            check_field(self.DOC, name, getattr(self, name), str)
        check_field(self.DOC, "counts", self.counts, dict)
        for name in ("value", "limit"):
            # JSON has no NaN or infinity: a non-finite offending value is named in the reason instead.
            number = getattr(self, name)
            if isinstance(number, float) and not math.isfinite(number):
                object.__setattr__(self, name, None)


@dataclass(frozen=True)
class ActionTagDoc(Document):
    """Where one published action came from; one per ``policy/action`` message, matched by ``stamp_ns``.

    ``observation_stamp_ns``: the stamp of the observation its chunk was computed from (camera image
    published -> action published is ``stamp_ns - observation_stamp_ns``); ``chunk_id`` counts the
    episode's chunks from 0 and ``index`` is the action's place in its chunk; ``inference_ms`` is
    that chunk's inference latency. ``held`` is non-empty when the action is a hold-still command
    given instead of a rejected chunk (lockstep simulation), and says why.
    """

    DOC: ClassVar[str] = "action_tag"
    episode_id: str
    stamp_ns: int
    observation_stamp_ns: int
    subgoal: str
    chunk_id: int
    index: int
    policy: str
    inference_ms: float = 0.0
    held: str = ""

    def __post_init__(self) -> None:
        check_field(self.DOC, "stamp_ns", self.stamp_ns, int)
        check_field(self.DOC, "observation_stamp_ns", self.observation_stamp_ns, int)
        check_field(self.DOC, "subgoal", self.subgoal, str)
        check_field(self.DOC, "chunk_id", self.chunk_id, int)
        check_field(self.DOC, "index", self.index, int)
        check_field(self.DOC, "inference_ms", self.inference_ms, (int, float))
        check_field(self.DOC, "held", self.held, str)
        if self.chunk_id < 0 or self.index < 0:
            raise SchemaError(f"{self.DOC}: chunk_id and index must be >= 0, got {self.chunk_id}, {self.index}")


DOCUMENTS: tuple[type[Document], ...] = (EpisodeCommand, EpisodeStatus, GripperEventsDoc, PrivilegedStateDoc,
                                         DecisionDoc, VerificationRequestDoc, VerificationResultDoc,
                                         PlanRequestDoc, PlanResultDoc, EpisodeEventDoc, EpisodeScoreDoc,
                                         EpisodeLabels, EpisodeCommandReply, SafetyInterventionDoc,
                                         ActionTagDoc)
