"""The Franka through franky (``franky-control`` on PyPI), streaming joint targets without blocking.

* Limits: at connection the arm's own velocity, acceleration and jerk limits are read from franky
  (``joint_velocity_limit`` etc., what its planner enforces) and its joint position limits from the
  URDF franky reports; :class:`~ladder_ros.robots.franka.StreamLimits` combines them with the model.
* Motions: each target is an asynchronous ``JointWaypointMotion`` of two waypoints, a via point
  short of the target passed with a velocity (after about one period) and the target at rest
  (:func:`ladder_ros.robots.franka.stream_waypoints` says why: no overshoot when the stream stops);
  franky lets a new motion of the same control type take over a running one seamlessly, so the
  stream is one continuous trajectory. No motion may make franky's planner start from the target
  it stands on (:func:`ladder_ros.robots.franka.stream_motion`: Ruckig fails there with -111):
  where the via point would lie on the target, a target the running motion already comes to rest
  on is not sent again (:attr:`FrankyArm.resting_at`), and another one ends in a short settling
  move of the last joint.
* The gripper: ``Gripper.width`` is a network round trip (about 100 ms) and its moves block, so one
  worker thread owns the gripper: it reads the width continuously and carries out the newest
  command (``move`` to open, ``grasp`` to close on whatever is in the hand), never the driver's
  control loop.
* Errors: a reflex or a control error surfaces as an exception from the running motion
  (``poll_motion``); ``recover_from_errors`` runs franky's automatic recovery and may block, so the
  driver runs it on its vendor-call worker with a deadline.

``franky`` is imported when a driver starts, with a clear error when it is missing.
"""

from __future__ import annotations

import importlib
import threading
import time
from dataclasses import dataclass

import numpy as np

from ladder_ros.core.errors import LadderError
from ladder_ros.core.rotations import quaternion_to_matrix
from ladder_ros.robots import thread_scheduling
from ladder_ros.robots.franka import FrankaModel, StreamLimits, stream_motion, urdf_joint_limits
from ladder_ros.robots.gripper import ApertureRange
from ladder_ros.robots.interbotix_arm import BackendUnavailable

CONNECT_RETRY_S = 0.5  # project choice: how often a refused connection is tried again while connect_timeout_s lasts
CANNOT_CONNECT = "cannot connect to the Franka at"
MISSING_FRANKY = ("the Franka driver needs franky (pip install franky-control==2.0.0, requirements/robots.txt; its "
                  "wheels bundle libfranka, which must match the robot's system version) "
                  "(see docs/robot_bringup.md#no-franky)")


def import_franky():
    try:
        return importlib.import_module("franky")
    except ImportError as exc:
        raise BackendUnavailable(f"{MISSING_FRANKY} ({exc})") from None


@dataclass
class FrankaReading:
    joints: np.ndarray  # rad
    velocities: np.ndarray  # rad/s
    ee_pose: np.ndarray  # 4x4, base frame
    aperture: float | None  # normalised; None until the gripper worker has read a width
    width_m: float | None
    width_age_s: float | None


class GripperWorker:
    """Owns a franky ``Gripper``: reads the width in a loop, carries out the newest target aperture."""

    def __init__(self, gripper, width_range: ApertureRange, speed_m_s: float, force_n: float,
                 tolerance: float = 0.05):
        self.gripper = gripper
        self.range = width_range
        self.speed = speed_m_s
        self.force = force_n
        self.tolerance = tolerance  # commands closer than this (aperture) to the last one are not re-sent
        self.error: str | None = None
        self.read_times: list[float] = []  # seconds per width read (benchmarks)
        self.moves = 0  # commands carried out
        self._lock = threading.Lock()
        self._width: tuple[float, float] | None = None  # (width m, monotonic time read)
        self._target: float | None = None
        self._sent: float | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="franky-gripper", daemon=True)
        self._thread.start()

    def command(self, aperture: float) -> None:
        with self._lock:
            self._target = float(aperture)

    def latest(self) -> tuple[float, float] | None:
        with self._lock:
            return self._width

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                started = time.monotonic()
                width = float(self.gripper.width)
                now = time.monotonic()
                self.read_times = (self.read_times + [now - started])[-200:]
                with self._lock:
                    self._width = (width, now)
                    target = self._target
                if target is not None and (self._sent is None or abs(target - self._sent) > self.tolerance):
                    self._send(target)
            except Exception as exc:  # keep reading: the driver reports the error and holds the arm
                self.error = f"gripper: {exc!r}"
                self._stop.wait(0.1)  # project choice: retry ten times a second, without spinning on a dead link

    def _send(self, aperture: float) -> None:
        """Blocking move or grasp (this thread only); opening moves, closing grasps with wide tolerances."""
        self._sent = aperture
        width = self.range.reading(aperture)
        if self._width is not None and width < self._width[0]:
            # Closing: grasp whatever is between the fingers (any width down to the target counts).
            ok = self.gripper.grasp(width, self.speed, self.force, epsilon_inner=1.0, epsilon_outer=1.0)
            what = "grasp"
        else:
            ok = self.gripper.move(width, self.speed)
            what = "move"
        self.moves += 1
        if ok is False:  # franky returns whether the hand reached its command
            self.error = f"gripper: the {what} to {width:.4f} m did not reach its command"

    def close(self) -> None:
        """Stop the worker; wait for it at most 2 s (project choice), as a read on a dead connection may hang."""
        self._stop.set()
        self._thread.join(timeout=2.0)


class FrankyArm:
    """A connected Franka arm and hand."""

    def __init__(self, *, host: str, model: FrankaModel, dynamics_factor: float, gripper_speed_m_s: float,
                 gripper_force_n: float, max_width_m: float, realtime: bool,
                 max_joint_velocity: tuple[float, ...] | None = None):
        franky = import_franky()
        self.franky = franky
        self.model = model
        self.dynamics_factor = float(dynamics_factor)
        with thread_scheduling.kept() as scheduling:  # libfranka makes the connecting thread real-time
            try:
                config = franky.RealtimeConfig.Enforce if realtime else franky.RealtimeConfig.Ignore
                self.robot = franky.Robot(host, realtime_config=config)
                self.robot.relative_dynamics_factor = self.dynamics_factor
                self.robot.recover_from_errors()
                gripper = franky.Gripper(host)
                reported = (self.robot.joint_velocity_limit.get(), self.robot.joint_acceleration_limit.get(),
                            self.robot.joint_jerk_limit.get())
                urdf = self.robot.model_urdf
            except Exception as exc:
                raise BackendUnavailable(f"{CANNOT_CONNECT} {host}: {exc!r}") from None
        # The setting libfranka chose goes to franky's control thread alone (lent to the call that starts it, see
        # _move); this thread, and the threads and processes it starts, keep their own.
        self.control_scheduling = scheduling.set_by_call
        self.scheduling = scheduling_report(scheduling)
        try:
            urdf_lower, urdf_upper = urdf_joint_limits(urdf)
        except LadderError:
            urdf_lower = urdf_upper = None  # no URDF limits reported: the model's alone
        self.reported_velocity = tuple(float(v) for v in np.asarray(reported[0]).ravel())
        self.limits = StreamLimits.from_robot(model, self.reported_velocity, np.asarray(reported[1]).ravel(),
                                              np.asarray(reported[2]).ravel(), self.dynamics_factor, urdf_lower,
                                              urdf_upper, max_joint_velocity,
                                              source=f"franky's limits for the Franka at {host} (x "
                                                     f"{self.dynamics_factor:g}), {model.name} positions")
        width_range = ApertureRange(0.0, max_width_m, source="Franka Hand opening width")
        self.gripper = GripperWorker(gripper, width_range, gripper_speed_m_s, gripper_force_n)
        # The target the last streamed motion comes to rest on, while it runs (None: none, or another motion took
        # over: a stop, an error, a recovery).
        self.resting_at: np.ndarray | None = None
        self.streamed = 0  # motions started by send_joints (benchmarks)
        self.held = 0  # targets not sent again: the running motion rests on them already

    def read(self) -> FrankaReading:
        state = self.robot.current_joint_state
        pose = self.robot.current_cartesian_state.pose.end_effector_pose
        t = np.eye(4)
        x, y, z, w = (float(v) for v in np.asarray(pose.quaternion).ravel())
        t[:3, :3] = quaternion_to_matrix(np.array([w, x, y, z]))
        t[:3, 3] = np.asarray(pose.translation, dtype=np.float64).ravel()
        latest = self.gripper.latest()
        if latest is None:
            aperture = width = age = None
        else:
            width, read_at = latest
            aperture = self.gripper.range.aperture(width)
            age = time.monotonic() - read_at
        return FrankaReading(np.asarray(state.position, dtype=np.float64).ravel(),
                             np.asarray(state.velocity, dtype=np.float64).ravel(), t, aperture, width, age)

    def send_joints(self, via: np.ndarray, via_velocity: np.ndarray, target: np.ndarray, period_s: float) -> None:
        """Stream a target (non-blocking): pass ``via`` with ``via_velocity`` in about a period, rest at ``target``
        (:func:`~ladder_ros.robots.franka.stream_motion` says how, or that the running motion rests there already)."""
        f = self.franky
        resting = self.resting_at if self.resting_at is not None and self.robot.is_in_control else None
        motion = stream_motion(via, via_velocity, target, period_s, self.limits, resting_at=resting)
        if not motion:  # the running motion comes to rest on this target already
            self.held += 1
            return
        waypoints = []
        for waypoint in motion:  # the last one rests (franky's JointState without a velocity)
            state = (f.JointState(waypoint.position) if waypoint is motion[-1]
                     else f.JointState(waypoint.position, waypoint.velocity))
            if waypoint.minimum_time_s is None:
                waypoints.append(f.JointWaypoint(state))
            else:
                milliseconds = max(1, int(round(waypoint.minimum_time_s * 1000)))
                waypoints.append(f.JointWaypoint(state, minimum_time=f.Duration(milliseconds)))
        self.resting_at = None
        self._move(f.JointWaypointMotion(waypoints, return_when_finished=False))
        self.resting_at = np.array(motion[-1].position)
        self.streamed += 1

    def _move(self, motion) -> None:
        """Start ``motion`` (non-blocking); franky's control thread, started here, gets the real-time setting."""
        with thread_scheduling.lent(self.control_scheduling):
            self.robot.move(motion, asynchronous=True)

    def send_gripper(self, aperture: float) -> None:
        self.gripper.command(aperture)

    def stop(self) -> str:
        """Brake to rest as fast as the arm's limits allow (takes over the running motion); it then holds there."""
        self.resting_at = None
        if not self.robot.is_in_control:
            return "no motion running: the arm rests where it is"
        self._move(self.franky.JointStopMotion())
        return "braking to rest (franky JointStopMotion)"

    def poll(self) -> str | None:
        """The arm's error since the last poll (a reflex, a control exception), or None."""
        try:
            self.robot.poll_motion()
        except Exception as exc:
            self.resting_at = None
            return f"{type(exc).__name__}: {exc}"
        if self.gripper.error:
            error, self.gripper.error = self.gripper.error, None
            return error
        return None

    def recover(self) -> str:
        """*Blocking* (the driver's worker): franky's automatic error recovery."""
        self.resting_at = None
        if not self.robot.recover_from_errors():
            raise LadderError("franky's error recovery reported failure")
        return "franky error recovery succeeded"

    def close(self) -> None:
        """Stop, then drop the connections (a Franka serves one client at a time)."""
        self.gripper.close()
        try:
            self.robot.stop()
        except Exception:  # the connection may be gone already
            pass
        self.robot = None
        self.gripper.gripper = None


def scheduling_report(scheduling: thread_scheduling.Kept) -> str:
    """How franky's control thread is scheduled, for the driver's log."""
    chosen = scheduling.set_by_call
    if chosen is None:
        return "franky's control thread: scheduled as the driver's thread (libfranka changed nothing)"
    report = (f"franky's control thread: {chosen.describe()} (libfranka's choice); the driver's thread kept "
              f"{scheduling.before.describe() if scheduling.before else 'its own'}")
    return f"{report}; {scheduling.restore_error}" if scheduling.restore_error else report


def connect_franky_arm(timeout_s: float, *, sleep=time.sleep, clock=time.monotonic, on_retry=None,
                       **arm_options) -> "FrankyArm":
    """``FrankyArm(**arm_options)``, tried again every ``CONNECT_RETRY_S`` while the arm refuses the connection.

    A control box that is still booting, or franky-sim still loading its model (the rehearsal starts
    it beside the driver), refuses connections for a while; the driver's ``connect_timeout_s`` is how
    long that may last. Anything else (franky missing, limits it cannot use) is refused at once.
    ``on_retry(error)`` hears each refused attempt (the driver logs it, throttled).
    """
    deadline = clock() + timeout_s
    while True:
        try:
            return FrankyArm(**arm_options)
        except BackendUnavailable as exc:
            if not str(exc).startswith(CANNOT_CONNECT) or clock() + CONNECT_RETRY_S > deadline:
                raise
            if on_retry is not None:
                on_retry(exc)
        sleep(CONNECT_RETRY_S)
