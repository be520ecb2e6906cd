"""xs_sdk's interface carried over ROS with standard types only, between the twin's API and the twin node.

On the robot, Interbotix's API reaches the ``xs_sdk`` node through the ``interbotix_xs_msgs``
services and topics under ``/<robot_name>``. Those message types come with the Interbotix workspace,
not with ROS, so the twin speaks the same interface with standard types, under the same names:

* ``/<robot_name>/joint_states``: ``sensor_msgs/JointState``, as xs_sdk publishes it (100 Hz; the arm
  joints, ``gripper``, ``left_finger``, ``right_finger``; rad, fingers in m);
* ``/<robot_name>/commands/joint_group`` and ``commands/joint_single``: ``sensor_msgs/JointState``
  whose ``name`` lists the joints addressed and ``position`` each joint's ``cmd`` in its operating
  mode's unit (rad in position mode, the PWM value for the gripper), as ``JointGroupCommand`` and
  ``JointSingleCommand`` carry them;
* the seven services as one JSON document per call on ``/<robot_name>/xs_sdk/call``
  (:class:`XsSdkCall`: an id, the service name and its request's fields) and one per answer on
  ``/<robot_name>/xs_sdk/reply`` (:class:`XsSdkReply`), in ``std_msgs/String``; the fields are those
  of the ``interbotix_xs_msgs`` service definitions (:mod:`.xs_msgs`);
* ``/<robot_name>/twin/fault``: a :class:`TwinFault` injected into the twin's motors (a stall, a
  motor error, a hung service), which no real xs_sdk has.

Decoding is strict (the project's documents, :mod:`ladder_ros.messages`): an unknown service, a
missing or unknown request field is refused with its name. No rclpy here.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any, ClassVar

from ladder_ros.messages import Document, SchemaError
from ladder_ros.instruments.widowx_twin import xs_msgs

# service -> (request class, response class): interbotix_xs_msgs/srv/*.srv
SERVICE_TYPES = {
    "get_robot_info": xs_msgs.RobotInfo,
    "set_operating_modes": xs_msgs.OperatingModes,
    "set_motor_pid_gains": xs_msgs.MotorGains,
    "set_motor_registers": xs_msgs.RegisterValues,
    "get_motor_registers": xs_msgs.RegisterValues,
    "torque_enable": xs_msgs.TorqueEnable,
    "reboot_motors": xs_msgs.Reboot,
}
JOINT_STATES = "joint_states"
CALL_TOPIC = "xs_sdk/call"
REPLY_TOPIC = "xs_sdk/reply"
FAULT_TOPIC = "twin/fault"
COMMAND_TOPICS = ("commands/joint_group", "commands/joint_single")

# Faults the twin can be given (TwinFault.fault)
STALL, RELEASE_STALL, MOTOR_ERROR, HANG, RELEASE_HANG = "stall", "release_stall", "motor_error", "hang", "release_hang"
FAULTS = (STALL, RELEASE_STALL, MOTOR_ERROR, HANG, RELEASE_HANG)


def _check(doc: str, name: str, value: Any, kind: type) -> None:
    if isinstance(value, bool) and kind is not bool or not isinstance(value, kind):
        raise SchemaError(f"{doc}: field {name!r} must be {kind.__name__}, got {type(value).__name__} {value!r}")


def topic(robot_name: str, name: str) -> str:
    """An xs_sdk topic's absolute name: xs_sdk lives in ``/<robot_name>``, outside any graph's namespace."""
    return f"/{robot_name}/{name}" if robot_name else f"/{name}"


def _to_fields(cls: type, data: Any, what: str) -> Any:
    if not isinstance(data, dict):
        raise SchemaError(f"{what}: expected a JSON object, got {type(data).__name__}")
    names = {f.name for f in fields(cls)}
    unknown = sorted(set(data) - names)
    if unknown:
        raise SchemaError(f"{what}: unknown field {unknown[0]!r} (fields: {', '.join(sorted(names))})")
    try:
        return cls(**data)
    except TypeError as exc:
        raise SchemaError(f"{what}: {exc}") from None


def _service(service: Any, doc: str) -> Any:
    _check(doc, "service", service, str)
    if service not in SERVICE_TYPES:
        raise SchemaError(f"{doc}: xs_sdk has no service {service!r} (it has: {', '.join(SERVICE_TYPES)})")
    return SERVICE_TYPES[service]


@dataclass(frozen=True)
class XsSdkCall(Document):
    """One service call to xs_sdk: ``request`` holds the fields of ``<service>.Request``."""

    DOC: ClassVar[str] = "xs_sdk_call"
    call_id: int
    service: str
    request: dict

    def __post_init__(self) -> None:
        _check(self.DOC, "call_id", self.call_id, int)
        _service(self.service, self.DOC)
        _check(self.DOC, "request", self.request, dict)

    @classmethod
    def of(cls, call_id: int, service: str, request: Any) -> "XsSdkCall":
        return cls(call_id=int(call_id), service=service, request=asdict(request))

    def typed_request(self) -> Any:
        return _to_fields(SERVICE_TYPES[self.service].Request, self.request, f"{self.DOC} {self.service}")


@dataclass(frozen=True)
class XsSdkReply(Document):
    """The answer to call ``call_id``: the fields of ``<service>.Response``."""

    DOC: ClassVar[str] = "xs_sdk_reply"
    call_id: int
    service: str
    response: dict

    def __post_init__(self) -> None:
        _check(self.DOC, "call_id", self.call_id, int)
        _service(self.service, self.DOC)
        _check(self.DOC, "response", self.response, dict)

    @classmethod
    def of(cls, call_id: int, service: str, response: Any) -> "XsSdkReply":
        return cls(call_id=int(call_id), service=service, response=asdict(response))

    def typed_response(self) -> Any:
        return _to_fields(SERVICE_TYPES[self.service].Response, self.response, f"{self.DOC} {self.service}")


@dataclass(frozen=True)
class TwinFault(Document):
    """A fault injected into the twin: ``stall``/``release_stall`` or ``motor_error`` on ``joint`` (a motor
    error carries ``Hardware_Error_Status`` bits), ``hang``/``release_hang`` of an xs_sdk ``service``."""

    DOC: ClassVar[str] = "twin_fault"
    fault: str
    joint: str = ""
    service: str = ""
    bits: int = 0

    def __post_init__(self) -> None:
        _check(self.DOC, "fault", self.fault, str)
        if self.fault not in FAULTS:
            raise SchemaError(f"{self.DOC}: unknown fault {self.fault!r} (faults: {', '.join(FAULTS)})")
        _check(self.DOC, "joint", self.joint, str)
        _check(self.DOC, "service", self.service, str)
        _check(self.DOC, "bits", self.bits, int)
        if self.fault in (STALL, RELEASE_STALL, MOTOR_ERROR) and not self.joint:
            raise SchemaError(f"{self.DOC}: a {self.fault} names the joint")
        if self.fault in (HANG, RELEASE_HANG):
            _service(self.service, self.DOC)
