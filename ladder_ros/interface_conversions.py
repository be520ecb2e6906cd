"""Where the graph's documents meet their typed messages (``ladder_ros_interfaces``): the only module that does both.

Every exchange of the graph that no standard type carries is a message of the project's own interface
package (``interfaces/ladder_ros_interfaces``; docs/interfaces.md, "The messages"). Inside the Python code the
same exchanges are the documents of :mod:`ladder_ros.messages` (typed, validated dataclasses the core, the
panel and the evaluation use without ROS). :func:`document_to_msg` turns a document into its message and
:func:`document_from_msg` reads one back; both are exact (floats travel as float64, optional values as the
sentinels the ``.msg`` files document), and both refuse a bad value with one :class:`SchemaError` that
names the message and the field: a wrong ``schema_version``, an unknown enum value, a sentinel out of
range, a payload that does not fit its message.

:func:`document_from_msg` reads fields by name only, so it takes a message built by rclpy as well as one that
``rosbags`` or ``mcap_ros2`` decoded from a recording: reading recordings needs no rclpy and no built
interface package. Recordings made before the typed interfaces carry each document as JSON in a
``std_msgs/String``; :func:`recorded_document` reads either.

JSON stays where a payload is free-form: a VLM's raw reply (plain text, whatever the model wrote), the
episode record in the final status (``record_json``, the archival line of ``episodes.jsonl`` with its
own schema version) and a safety filter's configured limits (``limits_json``).

Fields added to a message after recordings were made with it (the named policy of a command, a status and a
policy report; the policy node's list of policies) are read with their empty value from a message that lacks them.
"""

from __future__ import annotations

import functools
import json
import math
from typing import Any, Callable, Mapping, TypeVar

from ladder_ros.core.events import (
    ATTEMPT_ENDED,
    EPISODE_FINISHED,
    EPISODE_STARTED,
    QUEUE_CHANGED,
    RELEASE_SUPPRESSED,
    SUBGOAL_ADVANCED,
    SUBGOAL_COMPLETED,
    SUBGOAL_STARTED,
    VERIFICATION_ANSWERED,
    VERIFICATION_IGNORED,
    VERIFICATION_REQUESTED,
)
from ladder_ros.core.reset import START_LAYOUT, TASK_EPISODE
from ladder_ros.messages import (
    ActionTagDoc,
    DecisionDoc,
    Document,
    EpisodeCommand,
    EpisodeCommandReply,
    EpisodeEventDoc,
    EpisodeLabels,
    EpisodeScoreDoc,
    EpisodeStatus,
    GripperEventsDoc,
    PlanRequestDoc,
    PlanResultDoc,
    PrivilegedStateDoc,
    SafetyInterventionDoc,
    SchemaError,
    VerificationRequestDoc,
    VerificationResultDoc,
    decode,
)
from ladder_ros.policies.status import PolicyEntry, PolicyStatusDoc

PACKAGE = "ladder_ros_interfaces"
SCHEMA_VERSION = 1  # every top-level message's SCHEMA_VERSION constant; a message of another version is refused

D = TypeVar("D", bound=Document)


@functools.lru_cache(maxsize=1)
def _interfaces():
    """The generated Python module of the interface package (built by colcon on a robot, by
    scripts/setup.sh in a virtual environment of the ROS 2 wheels)."""
    try:
        from ladder_ros_interfaces import msg
    except ImportError as exc:
        raise SchemaError(f"the interface package {PACKAGE} is not installed ({exc}); build it with colcon on a "
                          "ROS install, or run scripts/setup.sh") from None
    return msg


def message_type(cls: type[Document]):
    """The rclpy message class that carries ``cls`` documents (for publishers and subscriptions)."""
    return getattr(_interfaces(), _NAMES[cls])


def type_name(cls: type[Document]) -> str:
    """``ladder_ros_interfaces/msg/Name`` of ``cls``'s message."""
    return f"{PACKAGE}/msg/{_NAMES[cls]}"


# ------------------------------------------------------------------------------ field helpers
def _ns(stamp: Any) -> int:
    return int(stamp.sec) * 1_000_000_000 + int(stamp.nanosec)


def _time(ns: int):
    from builtin_interfaces.msg import Time

    ns = int(ns)
    if ns < 0:
        raise SchemaError(f"a time stamp must be >= 0 ns, got {ns}")
    return Time(sec=ns // 1_000_000_000, nanosec=ns % 1_000_000_000)


def _opt_int(value: int | None) -> int:
    return -1 if value is None else int(value)


def _int_or_none(name: str, doc: str, value: Any) -> int | None:
    value = int(value)
    if value < -1:
        raise SchemaError(f"{doc}: field {name!r} must be >= 0 or -1 (none), got {value}")
    return None if value == -1 else value


def _opt_str(value: str | None) -> str:
    return "" if value is None else str(value)


def _str_or_none(value: Any) -> str | None:
    return str(value) or None


def _opt_float(value: float | None) -> float:
    return math.nan if value is None else float(value)


def _float_or_none(value: Any) -> float | None:
    value = float(value)
    return None if math.isnan(value) else value


def _ints(values: Any) -> list[int]:
    return [int(v) for v in values]


def _floats(values: Any) -> list[float]:
    return [float(v) for v in values]


def _strs(values: Any) -> list[str]:
    return [str(v) for v in values]


def _one(values: Any) -> Any | None:
    """The element of a bounded ``[<=1]`` sequence, or None when empty."""
    values = list(values)
    return values[0] if values else None


def _check_version(msg: Any, doc: str) -> None:
    version = int(msg.schema_version)
    if version != SCHEMA_VERSION:
        raise SchemaError(f"{doc}: unsupported schema_version {version}; this version reads {SCHEMA_VERSION}")


def _known(doc: str, what: str, data: Mapping, keys: tuple[str, ...]) -> None:
    unknown = sorted(set(data) - set(keys))
    if unknown:
        raise SchemaError(f"{doc}: {what} has a field the message does not carry: {unknown[0]!r}")


def _counts(values: Mapping[str, Any]) -> list:
    m = _interfaces()
    return [m.NamedCount(name=str(k), count=int(v)) for k, v in values.items()]


def _counts_dict(values: Any) -> dict[str, int]:
    return {str(v.name): int(v.count) for v in values}


def _values(values: Mapping[str, Any]) -> list:
    m = _interfaces()
    return [m.NamedValue(name=str(k), value=float(v)) for k, v in values.items()]


def _values_dict(values: Any) -> dict[str, float]:
    return {str(v.name): float(v.value) for v in values}


def _subgoal(data: Mapping) -> Any:
    return _interfaces().Subgoal(object=str(data["object"]), destination=str(data["destination"]),
                                 text=str(data["text"]))


def _subgoal_dict(msg: Any) -> dict:
    return {"object": str(msg.object), "destination": str(msg.destination), "text": str(msg.text)}


def _goal(data: Mapping) -> Any:
    m = _interfaces()
    return m.GoalState(resting=[m.RestingCount(kind=str(k), destination=str(d), count=int(n))
                                for k, d, n in data.get("resting", [])],
                       held=_strs(data.get("held", [])))


def _goal_dict(msg: Any) -> dict:
    return {"resting": [[str(r.kind), str(r.destination), int(r.count)] for r in msg.resting],
            "held": _strs(msg.held)}


def _json_text(doc: str, name: str, value: Any) -> str:
    try:
        return json.dumps(value, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise SchemaError(f"{doc}: {name} is not JSON ({exc})") from None


def _json_value(doc: str, name: str, text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError as exc:
        raise SchemaError(f"{doc}: {name} is not valid JSON ({exc})") from None


def _added(msg: Any, name: str, default: Any = "") -> Any:
    """A field added to its message later: a message recorded before it has the empty value."""
    return getattr(msg, name, default)


def _document(cls: type[D], **kwargs: Any) -> D:
    """``cls(**kwargs)``: the document's own checks name what is wrong."""
    try:
        return cls(**kwargs)
    except SchemaError:
        raise
    except (TypeError, ValueError, KeyError) as exc:
        raise SchemaError(f"{cls.DOC}: {exc}") from None


# ------------------------------------------------------------------------------ episodes
def _command_to(doc: EpisodeCommand) -> Any:
    return _interfaces().EpisodeCommand(schema_version=SCHEMA_VERSION, command=doc.command,
                                        episode_id=doc.episode_id, task_id=doc.task_id, layout=int(doc.layout),
                                        seed=int(doc.seed), variant=doc.variant, reason=doc.reason,
                                        policy=doc.policy, kind=doc.kind, start=doc.start,
                                        start_after=doc.start_after)


def _start_fields(msg: Any) -> dict:
    """An episode's kind and start (fields added later: a message recorded before them is a task from its layout)."""
    return {"kind": str(_added(msg, "kind")) or TASK_EPISODE, "start": str(_added(msg, "start")) or START_LAYOUT,
            "start_after": str(_added(msg, "start_after"))}


def _command_from(msg: Any) -> EpisodeCommand:
    return _document(EpisodeCommand, command=str(msg.command), episode_id=str(msg.episode_id),
                     task_id=str(msg.task_id), layout=int(msg.layout), seed=int(msg.seed),
                     variant=str(msg.variant), reason=str(msg.reason), policy=str(_added(msg, "policy")),
                     **_start_fields(msg))


def _reply_to(doc: EpisodeCommandReply) -> Any:
    return _interfaces().EpisodeCommandReply(schema_version=SCHEMA_VERSION, command=doc.command,
                                             episode_id=doc.episode_id, accepted=bool(doc.accepted),
                                             reason=doc.reason, assigned_id=doc.assigned_id)


def _reply_from(msg: Any) -> EpisodeCommandReply:
    return _document(EpisodeCommandReply, command=str(msg.command), episode_id=str(msg.episode_id),
                     accepted=bool(msg.accepted), reason=str(msg.reason), assigned_id=str(msg.assigned_id))


def _task(data: Mapping) -> Any:
    budget = data.get("budget_steps")
    return _interfaces().Task(
        task_id=str(data.get("task_id", "")), scene=str(data.get("scene", "")),
        category=str(data.get("category", "")), instruction=str(data.get("instruction", "")),
        subgoals=[_subgoal(s) for s in data.get("subgoals", [])], distractors=_strs(data.get("distractors", [])),
        suite=str(data.get("suite", "")), ladder=str(data.get("ladder", "")), layouts=int(data.get("layouts", 0)),
        success_rule=str(data.get("success_rule", "")), budget_steps=0 if budget is None else int(budget))


def _task_dict(msg: Any) -> dict:
    """The task as ``Task.to_dict`` writes it."""
    return {"task_id": str(msg.task_id), "scene": str(msg.scene), "category": str(msg.category),
            "instruction": str(msg.instruction), "subgoals": [_subgoal_dict(s) for s in msg.subgoals],
            "distractors": _strs(msg.distractors), "suite": str(msg.suite), "ladder": str(msg.ladder),
            "layouts": int(msg.layouts), "success_rule": str(msg.success_rule),
            "budget_steps": int(msg.budget_steps) or None}


def _status_to(doc: EpisodeStatus) -> Any:
    return _interfaces().EpisodeStatus(
        schema_version=SCHEMA_VERSION, episode_id=doc.episode_id, state=doc.state, seq=int(doc.seq),
        task=[] if doc.task is None else [_task(doc.task)], variant=doc.variant, policy=doc.policy,
        policy_config_hash=doc.policy_config_hash, preset=doc.preset,
        layout=int(doc.layout), seed=int(doc.seed), plan=[_subgoal(s) for s in doc.plan],
        budget_steps=int(doc.budget_steps), clock=doc.clock, rate_hz=float(doc.rate_hz), origin=_time(doc.origin_ns),
        step=int(doc.step), plan_index=_opt_int(doc.plan_index), instruction=_opt_str(doc.instruction),
        pending_request=_opt_int(doc.pending_request), verifier_available=bool(doc.verifier_available),
        finish_reason=_opt_str(doc.finish_reason),
        record_json="" if doc.result is None else _json_text(EpisodeStatus.DOC, "result", doc.result),
        message=doc.message, waiting_for=doc.waiting_for, kind=doc.kind, start=doc.start,
        start_after=doc.start_after)


def _status_from(msg: Any) -> EpisodeStatus:
    doc = EpisodeStatus.DOC
    task = _one(msg.task)
    step = int(msg.step)
    if step < -1:
        raise SchemaError(f"{doc}: field 'step' must be >= -1, got {step}")
    result = _json_value(doc, "record_json", msg.record_json) if msg.record_json else None
    return _document(
        EpisodeStatus, episode_id=str(msg.episode_id), state=str(msg.state), seq=int(msg.seq),
        task=None if task is None else _task_dict(task), variant=str(msg.variant), preset=str(msg.preset),
        layout=int(msg.layout), seed=int(msg.seed), plan=[_subgoal_dict(s) for s in msg.plan],
        budget_steps=int(msg.budget_steps), clock=str(msg.clock), rate_hz=float(msg.rate_hz),
        origin_ns=_ns(msg.origin), step=step, plan_index=_int_or_none("plan_index", doc, msg.plan_index),
        instruction=_str_or_none(msg.instruction),
        pending_request=_int_or_none("pending_request", doc, msg.pending_request),
        verifier_available=bool(msg.verifier_available), finish_reason=_str_or_none(msg.finish_reason),
        result=result, message=str(msg.message), waiting_for=str(msg.waiting_for),
        policy=str(_added(msg, "policy")), policy_config_hash=str(_added(msg, "policy_config_hash")),
        **_start_fields(msg))


# ------------------------------------------------------------------------------ per step
_END_KEYS = ("reason", "close_steps", "lift_m")


def _attempt_end(doc: str, data: Mapping | None) -> list:
    if data is None:
        return []
    _known(doc, "an attempt end", data, _END_KEYS)
    return [_interfaces().AttemptEnd(reason=str(data["reason"]), close_steps=int(data.get("close_steps", 0)),
                                     lift_m=_opt_float(data.get("lift_m")))]


def _attempt_end_dict(msg: Any) -> dict | None:
    if msg is None:
        return None
    data = {"reason": str(msg.reason), "close_steps": int(msg.close_steps)}
    lift = _float_or_none(msg.lift_m)
    if lift is not None:
        data["lift_m"] = lift
    return data


def _gripper_to(doc: GripperEventsDoc) -> Any:
    e = doc.events
    _known(doc.DOC, "events", e, ("step", "aperture", "is_open", "attempt_end", "release", "suppressed_close_steps"))
    return _interfaces().GripperEvents(
        schema_version=SCHEMA_VERSION, episode_id=doc.episode_id, step=int(doc.step), stamp=_time(doc.stamp_ns),
        aperture=float(e["aperture"]), is_open=bool(e["is_open"]),
        attempt_end=_attempt_end(doc.DOC, e.get("attempt_end")), release=_attempt_end(doc.DOC, e.get("release")),
        suppressed_close_steps=_opt_int(e.get("suppressed_close_steps")))


def _gripper_from(msg: Any) -> GripperEventsDoc:
    step = int(msg.step)
    events = {"step": step, "aperture": float(msg.aperture), "is_open": bool(msg.is_open),
              "attempt_end": _attempt_end_dict(_one(msg.attempt_end)),
              "release": _attempt_end_dict(_one(msg.release)),
              "suppressed_close_steps": _int_or_none("suppressed_close_steps", GripperEventsDoc.DOC,
                                                     msg.suppressed_close_steps)}
    return _document(GripperEventsDoc, episode_id=str(msg.episode_id), step=step, stamp_ns=_ns(msg.stamp),
                     events=events)


def _privileged_to(doc: PrivilegedStateDoc) -> Any:
    from geometry_msgs.msg import Point, Pose, Quaternion

    m = _interfaces()
    objects = []
    for name, o in doc.objects.items():
        p, q = o["position"], o["quaternion"]  # quaternion w, x, y, z
        if len(p) != 3 or len(q) != 4:
            raise SchemaError(f"{doc.DOC}: objects.{name} needs a position of 3 and a quaternion of 4 numbers")
        pose = Pose(position=Point(x=float(p[0]), y=float(p[1]), z=float(p[2])),
                    orientation=Quaternion(w=float(q[0]), x=float(q[1]), y=float(q[2]), z=float(q[3])))
        objects.append(m.ObjectPose(name=str(name), kind=str(o["kind"]), pose=pose))
    return m.PrivilegedState(
        schema_version=SCHEMA_VERSION, episode_id=doc.episode_id, step=int(doc.step), stamp=_time(doc.stamp_ns),
        goal=_goal(doc.goal), goal_states=[bool(g) for g in doc.goal_states], objects=objects,
        containers=_destination_msgs(doc, "containers", doc.containers),
        grasped=_strs(doc.grasped), ee_euler=[] if doc.ee_euler is None else _floats(doc.ee_euler),
        target_position=[] if doc.target_position is None else _floats(doc.target_position),
        regions=_destination_msgs(doc, "regions", doc.regions))


def _destination_msgs(doc: PrivilegedStateDoc, what: str, destinations: Mapping) -> list:
    """Containers or start regions as ``Container`` messages."""
    from geometry_msgs.msg import Point

    m = _interfaces()
    found = []
    for name, c in destinations.items():
        p = c["position"]
        if len(p) != 3:
            raise SchemaError(f"{doc.DOC}: {what}.{name}.position must be 3 numbers, got {p!r}")
        found.append(m.Container(name=str(name), position=Point(x=float(p[0]), y=float(p[1]), z=float(p[2])),
                                 half_extents=_floats(c["half_extents"]), surface_z=float(c["surface_z"])))
    return found


def _destination_dicts(messages: Any) -> dict:
    return {str(c.name): {"position": [float(c.position.x), float(c.position.y), float(c.position.z)],
                          "half_extents": _floats(c.half_extents), "surface_z": float(c.surface_z)}
            for c in messages}


def _privileged_from(msg: Any) -> PrivilegedStateDoc:
    objects = {}
    for o in msg.objects:
        p, q = o.pose.position, o.pose.orientation
        objects[str(o.name)] = {"kind": str(o.kind), "position": [float(p.x), float(p.y), float(p.z)],
                                "quaternion": [float(q.w), float(q.x), float(q.y), float(q.z)]}
    euler, target = _floats(msg.ee_euler), _floats(msg.target_position)
    return _document(PrivilegedStateDoc, episode_id=str(msg.episode_id), step=int(msg.step), stamp_ns=_ns(msg.stamp),
                     goal=_goal_dict(msg.goal), goal_states=[bool(g) for g in msg.goal_states], objects=objects,
                     containers=_destination_dicts(msg.containers), grasped=_strs(msg.grasped),
                     ee_euler=euler or None, target_position=target or None,
                     regions=_destination_dicts(_added(msg, "regions", [])))


_SUMMARY_KEYS = ("variant", "plan", "completed", "advanced", "pending", "ever_current", "finish_reason",
                 "finish_step")


def _summary(doc: str, data: Mapping) -> Any:
    _known(doc, "summary", data, _SUMMARY_KEYS)
    return _interfaces().OrchestratorSummary(
        variant=str(data.get("variant", "")), plan=[_subgoal(s) for s in data.get("plan", [])],
        completed=_ints(data.get("completed", [])), advanced=_ints(data.get("advanced", [])),
        pending=_ints(data.get("pending", [])), ever_current=_ints(data.get("ever_current", [])),
        finish_reason=_opt_str(data.get("finish_reason")), finish_step=_opt_int(data.get("finish_step")))


def _summary_dict(msg: Any) -> dict:
    """The summary as ``Orchestrator.summary`` writes it."""
    return {"variant": str(msg.variant), "plan": [_subgoal_dict(s) for s in msg.plan],
            "completed": _ints(msg.completed), "advanced": _ints(msg.advanced), "pending": _ints(msg.pending),
            "ever_current": _ints(msg.ever_current), "finish_reason": _str_or_none(msg.finish_reason),
            "finish_step": _int_or_none("summary.finish_step", DecisionDoc.DOC, msg.finish_step)}


def _decision_to(doc: DecisionDoc) -> Any:
    return _interfaces().Decision(
        schema_version=SCHEMA_VERSION, episode_id=doc.episode_id, step=int(doc.step), stamp=_time(doc.stamp_ns),
        instruction=_opt_str(doc.instruction), plan_index=_opt_int(doc.plan_index), finished=bool(doc.finished),
        finish_reason=_opt_str(doc.finish_reason), pending_request=_opt_int(doc.pending_request),
        summary=[] if doc.summary is None else [_summary(doc.DOC, doc.summary)])


def _decision_from(msg: Any) -> DecisionDoc:
    doc = DecisionDoc.DOC
    summary = _one(msg.summary)
    return _document(DecisionDoc, episode_id=str(msg.episode_id), step=int(msg.step), stamp_ns=_ns(msg.stamp),
                     instruction=_str_or_none(msg.instruction),
                     plan_index=_int_or_none("plan_index", doc, msg.plan_index), finished=bool(msg.finished),
                     finish_reason=_str_or_none(msg.finish_reason),
                     pending_request=_int_or_none("pending_request", doc, msg.pending_request),
                     summary=None if summary is None else _summary_dict(summary))


# ------------------------------------------------------------------------------ verification and planning
def _request_to(doc: VerificationRequestDoc) -> Any:
    r = doc.request
    _known(doc.DOC, "request", r, ("request_id", "step", "plan_index", "subgoal", "required", "reason"))
    if int(r["step"]) != doc.step:
        raise SchemaError(f"{doc.DOC}: the request is of step {r['step']}, not {doc.step}")
    return _interfaces().VerificationRequest(
        schema_version=SCHEMA_VERSION, episode_id=doc.episode_id, step=int(doc.step), stamp=_time(doc.stamp_ns),
        request_id=int(r["request_id"]), plan_index=int(r["plan_index"]), subgoal=_subgoal(r["subgoal"]),
        required=int(r["required"]), reason=str(r["reason"]))


def _request_from(msg: Any) -> VerificationRequestDoc:
    step = int(msg.step)
    request = {"request_id": int(msg.request_id), "step": step, "plan_index": int(msg.plan_index),
               "subgoal": _subgoal_dict(msg.subgoal), "required": int(msg.required), "reason": str(msg.reason)}
    return _document(VerificationRequestDoc, episode_id=str(msg.episode_id), step=step, stamp_ns=_ns(msg.stamp),
                     request=request)


_USAGE_KEYS = ("model", "input_tokens", "output_tokens", "thinking_tokens", "cost_usd", "cost_unknown", "attempts",
               "finish_reason", "failure")
_USAGE_INTS = ("input_tokens", "output_tokens", "thinking_tokens", "attempts")


def _usage(doc: str, data: Mapping) -> tuple[Any, bool]:
    """(VlmUsage, has_usage) of a call's accounting (``ladder_ros.vlm.components.usage_dict``)."""
    _known(doc, "usage", data, _USAGE_KEYS)
    usage = _interfaces().VlmUsage(
        model=_opt_str(data.get("model")), cost_usd=_opt_float(data.get("cost_usd")),
        cost_unknown=_opt_str(data.get("cost_unknown")), finish_reason=_opt_str(data.get("finish_reason")),
        failure=_opt_str(data.get("failure")), **{k: _opt_int(data.get(k)) for k in _USAGE_INTS})
    return usage, bool(data)


def _usage_dict(doc: str, msg: Any, has_usage: bool) -> dict:
    """The accounting as ``usage_dict`` writes it (every key; None where nothing was reported), or {}."""
    if not has_usage:
        return {}
    ints = {k: _int_or_none(f"usage.{k}", doc, getattr(msg, k)) for k in _USAGE_INTS}
    return {"model": _str_or_none(msg.model), "input_tokens": ints["input_tokens"],
            "output_tokens": ints["output_tokens"], "thinking_tokens": ints["thinking_tokens"],
            "cost_usd": _float_or_none(msg.cost_usd), "cost_unknown": _str_or_none(msg.cost_unknown),
            "attempts": ints["attempts"], "finish_reason": _str_or_none(msg.finish_reason),
            "failure": _str_or_none(msg.failure)}


def _result_to(doc: VerificationResultDoc) -> Any:
    r = doc.result
    _known(doc.DOC, "result", r, ("request_id", "count", "source", "raw_reply", "error", "latency_ms", "usage"))
    usage, has_usage = _usage(doc.DOC, r.get("usage") or {})
    return _interfaces().VerificationResult(
        schema_version=SCHEMA_VERSION, episode_id=doc.episode_id, step=int(doc.step), request_id=int(r["request_id"]),
        count=_opt_int(r.get("count")), source=str(r.get("source", "")), raw_reply=_opt_str(r.get("raw_reply")),
        error=_opt_str(r.get("error")), latency_ms=float(r.get("latency_ms", 0.0)), usage=usage, has_usage=has_usage)


def _result_from(msg: Any) -> VerificationResultDoc:
    doc = VerificationResultDoc.DOC
    result = {"request_id": int(msg.request_id), "count": _int_or_none("count", doc, msg.count),
              "source": str(msg.source), "raw_reply": _str_or_none(msg.raw_reply), "error": _str_or_none(msg.error),
              "latency_ms": float(msg.latency_ms), "usage": _usage_dict(doc, msg.usage, bool(msg.has_usage))}
    return _document(VerificationResultDoc, episode_id=str(msg.episode_id), step=int(msg.step), result=result)


def _plan_request_to(doc: PlanRequestDoc) -> Any:
    return _interfaces().PlanRequest(schema_version=SCHEMA_VERSION, episode_id=doc.episode_id, step=int(doc.step),
                                     stamp=_time(doc.stamp_ns), instruction=doc.instruction)


def _plan_request_from(msg: Any) -> PlanRequestDoc:
    return _document(PlanRequestDoc, episode_id=str(msg.episode_id), step=int(msg.step), stamp_ns=_ns(msg.stamp),
                     instruction=str(msg.instruction))


def _plan_result_to(doc: PlanResultDoc) -> Any:
    usage, has_usage = _usage(doc.DOC, doc.usage)
    return _interfaces().PlanResult(
        schema_version=SCHEMA_VERSION, episode_id=doc.episode_id, planned=doc.subgoals is not None,
        subgoals=[_subgoal(s) for s in doc.subgoals or []], error=_opt_str(doc.error),
        raw_reply=_opt_str(doc.raw_reply), source=doc.source, latency_ms=float(doc.latency_ms), usage=usage,
        has_usage=has_usage)


def _plan_result_from(msg: Any) -> PlanResultDoc:
    doc = PlanResultDoc.DOC
    subgoals = [_subgoal_dict(s) for s in msg.subgoals]
    if not msg.planned and subgoals:
        raise SchemaError(f"{doc}: a result without a plan ('planned' false) carries no subgoals")
    return _document(PlanResultDoc, episode_id=str(msg.episode_id), subgoals=subgoals if msg.planned else None,
                     error=_str_or_none(msg.error), raw_reply=_str_or_none(msg.raw_reply), source=str(msg.source),
                     latency_ms=float(msg.latency_ms), usage=_usage_dict(doc, msg.usage, bool(msg.has_usage)))


# ------------------------------------------------------------------------------ events
# The fields an event of each kind carries (ladder_ros.core.orchestrator's _emit calls), in their order; the
# EpisodeEvent message lists them too. lift_m is there only when the lift was measured.
EVENT_FIELDS: dict[str, tuple[str, ...]] = {
    EPISODE_STARTED: ("variant", "preset", "instruction", "plan", "budget_steps"),
    SUBGOAL_STARTED: ("plan_index", "text", "object", "destination"),
    ATTEMPT_ENDED: ("reason", "close_steps", "lift_m"),
    RELEASE_SUPPRESSED: ("close_steps",),
    VERIFICATION_REQUESTED: ("request_id", "plan_index", "text", "required", "reason"),
    VERIFICATION_ANSWERED: ("request_id", "plan_index", "count", "required", "complete", "source", "error"),
    VERIFICATION_IGNORED: ("request_id", "count", "source"),
    SUBGOAL_COMPLETED: ("plan_index", "by"),
    SUBGOAL_ADVANCED: ("plan_index", "verified"),
    QUEUE_CHANGED: ("reason", "pending"),
    EPISODE_FINISHED: ("reason", "completed", "advanced", "pending"),
}
_OPTIONAL_EVENT_FIELDS = {"lift_m"}  # absent from an event unless measured
# How each field travels: to the message (from the event's value) and back (from the message's field).
_EVENT_CODEC: dict[str, tuple[Callable[[Any], Any], Callable[[Any], Any]]] = {
    **{k: (int, int) for k in ("plan_index", "request_id", "close_steps", "required", "budget_steps")},
    **{k: (str, str) for k in ("text", "object", "destination", "reason", "by", "source", "variant", "preset",
                               "instruction")},
    **{k: (bool, bool) for k in ("complete", "verified")},
    **{k: (_ints, _ints) for k in ("completed", "advanced", "pending")},
    "plan": (_strs, _strs),
    "lift_m": (float, float),
    "count": (_opt_int, lambda v: None if int(v) == -1 else int(v)),
    "error": (_opt_str, _str_or_none),
}


def _event_to(doc: EpisodeEventDoc) -> Any:
    event = doc.event
    kind = event.get("kind")
    if kind not in EVENT_FIELDS:
        raise SchemaError(f"{doc.DOC}: unknown event kind {kind!r}; valid: {', '.join(EVENT_FIELDS)}")
    names = EVENT_FIELDS[kind]
    _known(doc.DOC, f"a {kind} event", event, ("step", "kind", *names))
    fields: dict[str, Any] = {"lift_m": math.nan, "count": -1}  # the sentinels of fields this kind lacks
    for name in names:
        if name not in event:
            if name in _OPTIONAL_EVENT_FIELDS:
                continue
            raise SchemaError(f"{doc.DOC}: a {kind} event has no field {name!r}")
        fields[name] = _EVENT_CODEC[name][0](event[name])
    return _interfaces().EpisodeEvent(schema_version=SCHEMA_VERSION, episode_id=doc.episode_id, index=int(doc.index),
                                      step=int(event["step"]), kind=kind, **fields)


def _event_from(msg: Any) -> EpisodeEventDoc:
    kind = str(msg.kind)
    if kind not in EVENT_FIELDS:
        raise SchemaError(f"{EpisodeEventDoc.DOC}: unknown event kind {kind!r}; valid: {', '.join(EVENT_FIELDS)}")
    event: dict[str, Any] = {"step": int(msg.step), "kind": kind}
    for name in EVENT_FIELDS[kind]:
        value = getattr(msg, name)
        if name in _OPTIONAL_EVENT_FIELDS and math.isnan(float(value)):
            continue
        event[name] = _EVENT_CODEC[name][1](value)
    return _document(EpisodeEventDoc, episode_id=str(msg.episode_id), index=int(msg.index), event=event)


# ------------------------------------------------------------------------------ score, safety, labels
_SCORE_KEYS = ("success", "subgoals_done", "subgoals", "violations", "final_goal", "steps_used", "simulator",
               "success_rule", "bridge_timing_s", "steps_taken", "safety", "twin")
_OUTCOME_KEYS = ("index", "text", "done", "cause", "first_done_step")
_SAFETY_KEYS = ("applied", "interventions", "counts", "limits")
_TWIN_KEYS = ("physics_skipped_s", "camera")
_CAMERA_KEYS = ("frames", "late", "channel", "render_p50_ms", "render_max_ms", "error")


def _safety_summary(doc: str, safety: Mapping | None) -> list:
    if safety is None:
        return []
    _known(doc, "safety", safety, _SAFETY_KEYS)
    return [_interfaces().SafetySummary(applied=int(safety.get("applied", 0)),
                                        interventions=int(safety.get("interventions", 0)),
                                        counts=_counts(safety.get("counts") or {}),
                                        limits_json=_json_text(doc, "safety.limits", safety.get("limits") or {}))]


def _safety_summary_dict(doc: str, msg: Any) -> dict | None:
    if msg is None:
        return None
    return {"applied": int(msg.applied), "interventions": int(msg.interventions), "counts": _counts_dict(msg.counts),
            "limits": _json_value(doc, "safety.limits_json", msg.limits_json)}


def _twin_report(doc: str, twin: Mapping | None) -> list:
    if twin is None:
        return []
    _known(doc, "twin", twin, _TWIN_KEYS)
    camera = twin.get("camera") or {}
    _known(doc, "twin.camera", camera, _CAMERA_KEYS)
    return [_interfaces().TwinReport(
        physics_skipped_s=float(twin.get("physics_skipped_s", 0.0)), camera_frames=int(camera.get("frames", 0)),
        camera_late=int(camera.get("late", 0)), camera_channel=str(camera.get("channel", "")),
        camera_render_p50_ms=_opt_float(camera.get("render_p50_ms")),
        camera_render_max_ms=_opt_float(camera.get("render_max_ms")), camera_error=str(camera.get("error", "")))]


def _twin_report_dict(msg: Any) -> dict | None:
    if msg is None:
        return None
    return {"physics_skipped_s": float(msg.physics_skipped_s),
            "camera": {"frames": int(msg.camera_frames), "late": int(msg.camera_late),
                       "channel": str(msg.camera_channel), "render_p50_ms": _float_or_none(msg.camera_render_p50_ms),
                       "render_max_ms": _float_or_none(msg.camera_render_max_ms), "error": str(msg.camera_error)}}


def _score_to(doc: EpisodeScoreDoc) -> Any:
    s = doc.score
    _known(doc.DOC, "score", s, _SCORE_KEYS)
    m = _interfaces()
    outcomes = []
    for o in s.get("subgoals", []):
        _known(doc.DOC, "a subgoal outcome", o, _OUTCOME_KEYS)
        outcomes.append(m.SubgoalOutcome(index=int(o["index"]), text=str(o["text"]), done=bool(o["done"]),
                                         cause=_opt_str(o.get("cause")),
                                         first_done_step=_opt_int(o.get("first_done_step"))))
    if ("steps_taken" in s) != ("bridge_timing_s" in s):
        raise SchemaError(f"{doc.DOC}: a bridge's score has both steps_taken and bridge_timing_s, others neither")
    final_goal = s.get("final_goal") or {}
    return m.EpisodeScore(
        schema_version=SCHEMA_VERSION, episode_id=doc.episode_id, step=int(doc.step), success=bool(s["success"]),
        subgoals_done=int(s["subgoals_done"]), subgoals=outcomes, violations=_strs(s.get("violations", [])),
        final_goal=_goal(final_goal), has_final_goal=bool(final_goal), steps_used=int(s.get("steps_used", 0)),
        simulator=str(s.get("simulator", "")), success_rule=str(s.get("success_rule", "")),
        bridge_timing_s=_values(s.get("bridge_timing_s") or {}), steps_taken=_opt_int(s.get("steps_taken")),
        safety=_safety_summary(doc.DOC, s.get("safety")), twin=_twin_report(doc.DOC, s.get("twin")))


def _score_from(msg: Any) -> EpisodeScoreDoc:
    doc = EpisodeScoreDoc.DOC
    outcomes = [{"index": int(o.index), "text": str(o.text), "done": bool(o.done), "cause": _str_or_none(o.cause),
                 "first_done_step": _int_or_none("first_done_step", doc, o.first_done_step)} for o in msg.subgoals]
    score = {"success": bool(msg.success), "subgoals_done": int(msg.subgoals_done), "subgoals": outcomes,
             "violations": _strs(msg.violations),
             "final_goal": _goal_dict(msg.final_goal) if msg.has_final_goal else {},
             "steps_used": int(msg.steps_used), "simulator": str(msg.simulator), "success_rule": str(msg.success_rule)}
    steps_taken = _int_or_none("steps_taken", doc, msg.steps_taken)
    if steps_taken is not None:
        score.update(bridge_timing_s=_values_dict(msg.bridge_timing_s), steps_taken=steps_taken)
    safety = _safety_summary_dict(doc, _one(msg.safety))
    if safety is not None:
        score["safety"] = safety
    twin = _twin_report_dict(_one(msg.twin))
    if twin is not None:
        score["twin"] = twin
    return _document(EpisodeScoreDoc, episode_id=str(msg.episode_id), step=int(msg.step), score=score)


def _intervention_to(doc: SafetyInterventionDoc) -> Any:
    return _interfaces().SafetyIntervention(
        schema_version=SCHEMA_VERSION, episode_id=doc.episode_id, step=int(doc.step), source=doc.source, kind=doc.kind,
        reason=doc.reason, axis=_opt_str(doc.axis), value=_opt_float(doc.value), limit=_opt_float(doc.limit),
        counts=_counts(doc.counts))


def _intervention_from(msg: Any) -> SafetyInterventionDoc:
    return _document(SafetyInterventionDoc, episode_id=str(msg.episode_id), step=int(msg.step), source=str(msg.source),
                     kind=str(msg.kind), reason=str(msg.reason), axis=_str_or_none(msg.axis),
                     value=_float_or_none(msg.value), limit=_float_or_none(msg.limit),
                     counts=_counts_dict(msg.counts))


FINAL = "final"  # the history entry of the "final" mark, whose value is a boolean


def _history_value(what: str, value: Any) -> str:
    if what == FINAL:
        return "true" if value else "false"
    return _opt_str(value)


def _history_value_back(what: str, text: str) -> Any:
    if what == FINAL:
        if text not in ("true", "false"):
            raise SchemaError(f"{EpisodeLabels.DOC}: a 'final' change has the value true or false, got {text!r}")
        return text == "true"
    return text if what == "note" else _str_or_none(text)


def _labels_to(doc: EpisodeLabels) -> Any:
    m = _interfaces()
    history = []
    for h in doc.history:
        _known(doc.DOC, "a history entry", h, ("revision", "unix_s", "what", "value"))
        what = str(h["what"])
        history.append(m.LabelChange(revision=int(h["revision"]), unix_s=float(h["unix_s"]), what=what,
                                     value=_history_value(what, h["value"])))
    return m.EpisodeLabels(
        schema_version=SCHEMA_VERSION, episode_id=doc.episode_id, revision=int(doc.revision),
        subgoals=[m.SubgoalLabel(plan_index=int(k), label=str(v)) for k, v in doc.subgoals.items()],
        episode=_opt_str(doc.episode), note=doc.note, operator_name=doc.operator, final=bool(doc.final),
        updated_unix_s=float(doc.updated_unix_s), history=history)


def _labels_from(msg: Any) -> EpisodeLabels:
    history = [{"revision": int(h.revision), "unix_s": float(h.unix_s), "what": str(h.what),
                "value": _history_value_back(str(h.what), str(h.value))} for h in msg.history]
    return _document(EpisodeLabels, episode_id=str(msg.episode_id), revision=int(msg.revision),
                     subgoals={str(int(s.plan_index)): str(s.label) for s in msg.subgoals},
                     episode=_str_or_none(msg.episode), note=str(msg.note), operator=str(msg.operator_name),
                     final=bool(msg.final), updated_unix_s=float(msg.updated_unix_s), history=history)


# ------------------------------------------------------------------------------ policy
def _tag_to(doc: ActionTagDoc) -> Any:
    return _interfaces().ActionTag(
        schema_version=SCHEMA_VERSION, episode_id=doc.episode_id, stamp=_time(doc.stamp_ns),
        observation_stamp=_time(doc.observation_stamp_ns), subgoal=doc.subgoal, chunk_id=int(doc.chunk_id),
        index=int(doc.index), policy=doc.policy, inference_ms=float(doc.inference_ms), held=doc.held)


def _tag_from(msg: Any) -> ActionTagDoc:
    return _document(ActionTagDoc, episode_id=str(msg.episode_id), stamp_ns=_ns(msg.stamp),
                     observation_stamp_ns=_ns(msg.observation_stamp), subgoal=str(msg.subgoal),
                     chunk_id=int(msg.chunk_id), index=int(msg.index), policy=str(msg.policy),
                     inference_ms=float(msg.inference_ms), held=str(msg.held))


_REPORT_KEYS = ("policy", "config", "config_hash", "final", "chunks", "rejected_chunks", "all_chunks_rejected", "steps",
                "held_steps", "held_by_reason", "inference_ms", "seam_jump_max", "ood", "server_errors", "warm_up_s",
                "execution", "blend_steps", "stale_dropped", "splices", "blended", "splice_jump_max", "guided_chunks",
                "reanchored")


def _report(data: Mapping) -> Any:
    _known(PolicyStatusDoc.DOC, "report", data, _REPORT_KEYS)
    latency = data.get("inference_ms") or {}
    ood = data.get("ood") or {}
    _known(PolicyStatusDoc.DOC, "report.inference_ms", latency, ("p50", "p95", "count"))
    _known(PolicyStatusDoc.DOC, "report.ood", ood, ("state", "action", "worst_sigma", "worst"))
    return _interfaces().PolicyReport(
        policy=str(data.get("policy", "")), config=str(data.get("config", "")),
        config_hash=str(data.get("config_hash", "")),
        final=bool(data.get("final", False)), chunks=int(data.get("chunks", 0)),
        rejected_chunks=_counts(data.get("rejected_chunks") or {}),
        all_chunks_rejected=bool(data.get("all_chunks_rejected", False)), steps=int(data.get("steps", 0)),
        held_steps=int(data.get("held_steps", 0)), held_by_reason=_counts(data.get("held_by_reason") or {}),
        inference_ms_p50=_opt_float(latency.get("p50")), inference_ms_p95=_opt_float(latency.get("p95")),
        inference_count=int(latency.get("count", 0)), seam_jump_max=_values(data.get("seam_jump_max") or {}),
        ood_states=int(ood.get("state", 0)), ood_actions=int(ood.get("action", 0)),
        ood_worst_sigma=float(ood.get("worst_sigma", 0.0)), ood_worst=str(ood.get("worst", "")),
        server_errors=int(data.get("server_errors", 0)), warm_up_s=_opt_float(data.get("warm_up_s")),
        execution=str(data.get("execution", "")), blend_steps=int(data.get("blend_steps", 0)),
        stale_dropped=int(data.get("stale_dropped", 0)), splices=int(data.get("splices", 0)),
        blended=int(data.get("blended", 0)), splice_jump_max=_values(data.get("splice_jump_max") or {}),
        guided_chunks=int(data.get("guided_chunks", 0)), reanchored=int(data.get("reanchored", 0)))


def _report_dict(msg: Any) -> dict:
    """The report as ``PolicyReport.to_dict`` writes it (a report recorded before it said how chunks ran, with an
    empty ``execution``, without the fields that say it; one recorded before it named its config, without
    ``config``)."""
    report = {"policy": str(msg.policy), "config_hash": str(msg.config_hash), "final": bool(msg.final),
              "chunks": int(msg.chunks), "rejected_chunks": _counts_dict(msg.rejected_chunks),
              "all_chunks_rejected": bool(msg.all_chunks_rejected), "steps": int(msg.steps),
              "held_steps": int(msg.held_steps), "held_by_reason": _counts_dict(msg.held_by_reason),
              "inference_ms": {"p50": _float_or_none(msg.inference_ms_p50), "p95": _float_or_none(msg.inference_ms_p95),
                               "count": int(msg.inference_count)},
              "seam_jump_max": _values_dict(msg.seam_jump_max),
              "ood": {"state": int(msg.ood_states), "action": int(msg.ood_actions),
                      "worst_sigma": float(msg.ood_worst_sigma), "worst": str(msg.ood_worst)},
              "server_errors": int(msg.server_errors), "warm_up_s": _float_or_none(msg.warm_up_s)}
    if msg.execution:
        report.update({"execution": str(msg.execution), "blend_steps": int(msg.blend_steps),
                       "stale_dropped": int(msg.stale_dropped), "splice_jump_max": _values_dict(msg.splice_jump_max),
                       "splices": int(msg.splices), "blended": int(msg.blended),
                       "guided_chunks": int(msg.guided_chunks), "reanchored": int(msg.reanchored)})
    if _added(msg, "config"):
        report["config"] = str(msg.config)
    return report


def _entry(data: Mapping) -> Any:
    entry = PolicyEntry.from_dict(data)
    return _interfaces().PolicyState(name=entry.name, config=entry.config, config_hash=entry.config_hash,
                                     state=entry.state, detail=entry.detail, warm_up_s=_opt_float(entry.warm_up_s))


def _entry_dict(msg: Any) -> dict:
    return PolicyEntry(name=str(msg.name), config=str(msg.config), config_hash=str(msg.config_hash),
                       state=str(msg.state), detail=str(msg.detail), warm_up_s=_float_or_none(msg.warm_up_s)).to_dict()


def _policy_status_to(doc: PolicyStatusDoc) -> Any:
    return _interfaces().PolicyStatus(
        schema_version=SCHEMA_VERSION, policy=doc.policy, state=doc.state, detail=doc.detail,
        config_hash=doc.config_hash, warm_up_s=_opt_float(doc.warm_up_s), elapsed_s=float(doc.elapsed_s),
        deadline_s=float(doc.deadline_s), episode_id=doc.episode_id,
        report=[_report(doc.report)] if doc.report else [], final=bool(doc.final),
        default_policy=doc.default_policy, policies=[_entry(e) for e in doc.policies])


def _policy_status_from(msg: Any) -> PolicyStatusDoc:
    report = _one(msg.report)
    return _document(PolicyStatusDoc, policy=str(msg.policy), state=str(msg.state), detail=str(msg.detail),
                     config_hash=str(msg.config_hash), warm_up_s=_float_or_none(msg.warm_up_s),
                     elapsed_s=float(msg.elapsed_s), deadline_s=float(msg.deadline_s),
                     episode_id=str(msg.episode_id), report={} if report is None else _report_dict(report),
                     final=bool(msg.final), default_policy=str(_added(msg, "default_policy")),
                     policies=[_entry_dict(e) for e in _added(msg, "policies", [])])


# ------------------------------------------------------------------------------ the table
# document class -> (message name, to message, from message)
_CODECS: dict[type, tuple[str, Callable[[Any], Any], Callable[[Any], Any]]] = {
    EpisodeCommand: ("EpisodeCommand", _command_to, _command_from),
    EpisodeCommandReply: ("EpisodeCommandReply", _reply_to, _reply_from),
    EpisodeStatus: ("EpisodeStatus", _status_to, _status_from),
    GripperEventsDoc: ("GripperEvents", _gripper_to, _gripper_from),
    PrivilegedStateDoc: ("PrivilegedState", _privileged_to, _privileged_from),
    DecisionDoc: ("Decision", _decision_to, _decision_from),
    VerificationRequestDoc: ("VerificationRequest", _request_to, _request_from),
    VerificationResultDoc: ("VerificationResult", _result_to, _result_from),
    PlanRequestDoc: ("PlanRequest", _plan_request_to, _plan_request_from),
    PlanResultDoc: ("PlanResult", _plan_result_to, _plan_result_from),
    EpisodeEventDoc: ("EpisodeEvent", _event_to, _event_from),
    EpisodeScoreDoc: ("EpisodeScore", _score_to, _score_from),
    EpisodeLabels: ("EpisodeLabels", _labels_to, _labels_from),
    SafetyInterventionDoc: ("SafetyIntervention", _intervention_to, _intervention_from),
    ActionTagDoc: ("ActionTag", _tag_to, _tag_from),
    PolicyStatusDoc: ("PolicyStatus", _policy_status_to, _policy_status_from),
}
_NAMES = {cls: codec[0] for cls, codec in _CODECS.items()}
DOCUMENT_OF_TYPE = {f"{PACKAGE}/msg/{codec[0]}": cls for cls, codec in _CODECS.items()}


def document_to_msg(document: Document) -> Any:
    """The typed message of ``document``; :class:`SchemaError` when a value does not fit its field."""
    try:
        codec = _CODECS[type(document)]
    except KeyError:
        raise SchemaError(f"no message carries {type(document).__name__} documents") from None
    try:
        return codec[1](document)
    except SchemaError:
        raise
    except (AssertionError, TypeError, ValueError, KeyError, OverflowError) as exc:  # rclpy's field setters assert
        raise SchemaError(f"{document.DOC}: a value does not fit its message field ({exc})") from None


def document_from_msg(msg: Any, cls: type[D]) -> D:
    """The ``cls`` document in ``msg`` (built by rclpy, or decoded from a recording); :class:`SchemaError`
    naming the message and the field when a value is out of range, of an unknown kind or of another
    schema version."""
    codec = _CODECS[cls]
    try:
        _check_version(msg, cls.DOC)
        return codec[2](msg)
    except SchemaError:
        raise
    except (AttributeError, TypeError, ValueError) as exc:
        raise SchemaError(f"{cls.DOC}: not a {codec[0]} message ({exc})") from None


def is_legacy_string(msg: Any) -> bool:
    """Whether ``msg`` is a ``std_msgs/String`` of a recording made before the typed interfaces."""
    return isinstance(getattr(msg, "data", None), str) and not hasattr(msg, "schema_version")


def recorded_document(msg: Any, cls: type[D]) -> D:
    """The ``cls`` document of a recorded message: a typed message, or the JSON document an older
    recording carries in a ``std_msgs/String``."""
    if is_legacy_string(msg):
        return decode(msg.data, cls)
    return document_from_msg(msg, cls)
