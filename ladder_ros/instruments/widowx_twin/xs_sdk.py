"""The xs_sdk side of the WidowX twin: the small interface the twin's API talks to, and an in-process xs_sdk.

On the robot, Interbotix's Python API talks to the ``xs_sdk`` node over ROS: seven services
(``get_robot_info``, ``set_operating_modes``, ``set_motor_pid_gains``, ``set_motor_registers``,
``get_motor_registers``, ``torque_enable``, ``reboot_motors``), three command topics
(``commands/joint_group``, ``commands/joint_single``, ``commands/joint_trajectory``) and the
``joint_states`` it publishes at 100 Hz (interbotix_xsarm_control ``config/wx250s.yaml``
``joint_state_publisher.update_rate``). :class:`XsSdk` is exactly that surface, so whatever stands
behind the twin's API (the in-process :class:`SimulatedXsSdk` here, or motors coupled to a
physics simulation in another process) implements three methods:

* ``call(service, request) -> Future`` (a :class:`concurrent.futures.Future` of the response);
* ``publish(topic, message)`` (a command; nothing comes back, as with a ROS topic);
* ``subscribe_joint_states(callback)`` (called with each :class:`~.motors.JointStateSample`).

:class:`SimulatedXsSdk` follows how xs_sdk serves them (Interbotix/interbotix_ros_core, branch
rolling, commit bf127b474e0554b93ef18b51becba38da9cbc255, ``interbotix_xs_sdk/src/xs_sdk_obj.cpp``
and ``xs_sdk.cpp``): every service, command and the joint-state timer are callbacks of one node in
its default, mutually exclusive callback group, so xs_sdk does one thing at a time: while a service
call runs (a reboot, say), commands wait and no joint states are published. A hang can be injected
into any service (:meth:`SimulatedXsSdk.hang`): the call then never answers until released, and
xs_sdk stalls behind it, as a wedged serial bus would. Every call and command is recorded with its
time (:attr:`SimulatedXsSdk.calls`).

:func:`connect` is how the twin's API finds the xs_sdk of a ``robot_name``: one registered with
:func:`register`, or else a fresh in-process one (a wx250s at its sleep pose, gripper open).
"""

from __future__ import annotations

import queue
import threading
import time
from concurrent.futures import Future
from typing import Any, Callable, Protocol

from ladder_ros.instruments.widowx_twin import xs_msgs
from ladder_ros.instruments.widowx_twin.motors import JointStateSample, WidowXMotors

SERVICES = ("get_robot_info", "set_operating_modes", "set_motor_pid_gains", "set_motor_registers",
            "get_motor_registers", "torque_enable", "reboot_motors")
COMMAND_TOPICS = ("commands/joint_group", "commands/joint_single", "commands/joint_trajectory")
JOINT_STATE_RATE_HZ = 100.0  # config/wx250s.yaml joint_state_publisher.update_rate


class XsSdk(Protocol):
    """What the twin's API needs from xs_sdk (see the module docstring)."""

    def call(self, service: str, request: Any) -> Future: ...

    def publish(self, topic: str, message: Any) -> None: ...

    def subscribe_joint_states(self, callback: Callable[[JointStateSample], None]) -> None: ...


class Hang:
    """An injected hang: the next ``count`` calls of ``service`` block xs_sdk until :meth:`release`."""

    def __init__(self, service: str, count: int):
        self.service = service
        self.count = count
        self.entered = threading.Event()  # a call is hanging now
        self._released = threading.Event()

    def release(self) -> None:
        self._released.set()

    def wait(self) -> None:
        self.entered.set()
        self._released.wait()


class SimulatedXsSdk:
    """xs_sdk in this process over :class:`~.motors.WidowXMotors` (see the module docstring)."""

    def __init__(self, motors: WidowXMotors | None = None, *, publish_hz: float = JOINT_STATE_RATE_HZ,
                 service_time_s: float = 0.002):
        self.motors = motors if motors is not None else WidowXMotors(time.monotonic)
        self.period = 1.0 / publish_hz
        self.service_time_s = service_time_s  # a service's round trip over the serial bus (order of ms)
        self.calls: list[tuple[float, str, Any]] = []
        self.published = 0
        self._subscribers: list[Callable[[JointStateSample], None]] = []
        self._hangs: dict[str, Hang] = {}
        self._lock = threading.Lock()
        # Held while xs_sdk touches the motors; whoever else moves them (a physics simulation coupled to
        # them, an injected fault) holds it too.
        self.motor_lock = threading.RLock()
        self._served_until = float("-inf")  # the motors' time of the last state published or command served
        self._inbox: queue.Queue = queue.Queue()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="twin-xs_sdk", daemon=True)
        self._thread.start()

    # ------------------------------------------------------------------ the interface
    def call(self, service: str, request: Any) -> Future:
        future: Future = Future()
        if service not in SERVICES:
            future.set_exception(KeyError(f"xs_sdk has no service {service!r}"))
            return future
        self._inbox.put((service, request, future, None))
        return future

    def publish(self, topic: str, message: Any, sent_at: float | None = None) -> None:
        """A command; ``sent_at`` (the motors' clock) is when its sender sent it, which is when it takes effect.

        The real xs_sdk writes a command to the motors within milliseconds of its sender's publish; a
        simulated one that served it later (its process busy) starts the move then all the same, but
        never before the joint states it has published already or a command it has served.
        """
        if topic not in COMMAND_TOPICS:
            raise KeyError(f"xs_sdk subscribes to no topic {topic!r}")
        self._inbox.put((topic, message, None, sent_at))

    def subscribe_joint_states(self, callback: Callable[[JointStateSample], None]) -> None:
        with self._lock:
            self._subscribers.append(callback)
        callback(self._sample())  # the current state at once, as a latched first message would be

    # ------------------------------------------------------------------ injecting faults
    def hang(self, service: str, count: int = 1) -> Hang:
        """The next ``count`` calls of ``service`` hang (and xs_sdk with them) until the returned hang is released."""
        if service not in SERVICES:
            raise KeyError(f"xs_sdk has no service {service!r}")
        hang = Hang(service, count)
        with self._lock:
            self._hangs[service] = hang
        return hang

    def stop(self) -> None:
        self._stop.set()
        with self._lock:
            hangs = list(self._hangs.values())
        for hang in hangs:
            hang.release()
        self._thread.join(timeout=2.0)

    def calls_of(self, name: str) -> list[Any]:
        return [request for _, called, request in list(self.calls) if called == name]

    # ------------------------------------------------------------------ serving, one thing at a time
    def _sample(self) -> JointStateSample:
        with self.motor_lock:
            sample = self.motors.joint_states()
            self._served_until = max(self._served_until, sample.stamp_s)
        return JointStateSample(sample.name, sample.position, sample.velocity, sample.effort, time.time())

    def _serve(self) -> None:
        next_publish = time.monotonic()
        while not self._stop.is_set():
            now = time.monotonic()
            if now >= next_publish:
                sample = self._sample()
                with self._lock:
                    subscribers = list(self._subscribers)
                for callback in subscribers:
                    callback(sample)
                self.published += 1
                next_publish = max(next_publish + self.period, now)
                continue
            try:
                name, request, future, sent_at = self._inbox.get(timeout=max(0.0, next_publish - now))
            except queue.Empty:
                continue
            self.calls.append((time.monotonic(), name, request))
            if future is None:
                with self.motor_lock:
                    at = self.motors.clock()
                    if sent_at is not None:
                        at = min(at, max(sent_at, self._served_until))
                    self._served_until = at
                    self._command(name, request, at)
                continue
            with self._lock:
                hang = self._hangs.get(name)
                if hang is not None:
                    hang.count -= 1
                    if hang.count <= 0:
                        del self._hangs[name]
            if hang is not None:
                hang.wait()
            time.sleep(self.service_time_s)
            try:
                with self.motor_lock:
                    response = self._service(name, request)
            except KeyError:  # an unknown joint or group: xs_sdk logs it and answers with an empty response
                response = _EMPTY[name]()
            future.set_result(response)

    def _command(self, topic: str, message: Any, at: float) -> None:
        if topic == "commands/joint_group":
            self.motors.write_group(message.name, list(message.cmd), now=at)
        elif topic == "commands/joint_single":
            self.motors.write_single(message.name, float(message.cmd), now=at)
        # commands/joint_trajectory: not simulated (the driver never sends trajectories)

    def _service(self, name: str, r: Any) -> Any:
        m = self.motors
        if name == "get_robot_info":
            return m.robot_info(r.cmd_type, r.name)
        if name == "set_motor_registers":
            m.set_registers(r.cmd_type, r.name, r.reg, r.value)
            return xs_msgs.RegisterValues.Response()
        if name == "get_motor_registers":
            return xs_msgs.RegisterValues.Response(values=m.get_registers(r.cmd_type, r.name, r.reg))
        if name == "torque_enable":
            m.torque_enable(r.cmd_type, r.name, r.enable)
            return xs_msgs.TorqueEnable.Response()
        if name == "reboot_motors":
            m.reboot(r.cmd_type, r.name, r.enable, r.smart_reboot)
            return xs_msgs.Reboot.Response()
        if name == "set_operating_modes":
            m.set_operating_modes(r.cmd_type, r.name, r.mode, r.profile_type, r.profile_velocity,
                                  r.profile_acceleration)
            return xs_msgs.OperatingModes.Response()
        return xs_msgs.MotorGains.Response()  # set_motor_pid_gains: gains are not modelled


_EMPTY = {"get_robot_info": xs_msgs.RobotInfo.Response, "set_operating_modes": xs_msgs.OperatingModes.Response,
          "set_motor_pid_gains": xs_msgs.MotorGains.Response, "set_motor_registers": xs_msgs.RegisterValues.Response,
          "get_motor_registers": xs_msgs.RegisterValues.Response, "torque_enable": xs_msgs.TorqueEnable.Response,
          "reboot_motors": xs_msgs.Reboot.Response}
_REGISTRY: dict[str, XsSdk] = {}
_REGISTRY_LOCK = threading.Lock()


def register(robot_name: str, sdk: XsSdk) -> XsSdk:
    """Serve ``robot_name`` with ``sdk`` (replacing one registered before)."""
    with _REGISTRY_LOCK:
        _REGISTRY[robot_name] = sdk
    return sdk


def connect(robot_name: str) -> XsSdk:
    """The xs_sdk serving ``robot_name``: the registered one, or a new in-process one (sleep pose, gripper open)."""
    with _REGISTRY_LOCK:
        if robot_name not in _REGISTRY:
            _REGISTRY[robot_name] = SimulatedXsSdk()
        return _REGISTRY[robot_name]


def reset() -> None:
    """Stop and forget every registered xs_sdk (tests that build several robots in one process)."""
    with _REGISTRY_LOCK:
        sdks = list(_REGISTRY.values())
        _REGISTRY.clear()
    for sdk in sdks:
        stop = getattr(sdk, "stop", None)
        if callable(stop):
            stop()
