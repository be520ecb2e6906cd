"""The twin's scene on the wall clock: the tabletop's objects under a gripper that goes where the motors put it.

The WidowX twin's motors (:mod:`.motors`) move on the wall clock as xs_sdk commands them; this
module couples them to the built-in MuJoCo tabletop (:mod:`ladder_ros.sim.mujoco_tabletop`), so the
objects feel the arm:

* **Arm → gripper.** Every ``physics_period_s`` (20 ms by default) the physics catches up with the
  wall clock in the tabletop's 4 ms substeps. The tabletop's gripper stand-in (a floating gantry
  with position servos) is driven to the WidowX's end effector: the forward kinematics of the
  motors' positions (``ee_gripper_link``, :mod:`ladder_ros.robots.wx250s`) at the end of the batch,
  its orientation relative to the arm's top-down pose (the tabletop's tool frame points down at
  identity, the WidowX's ``ee_gripper_link`` at ``WIDOWX_TOP_DOWN``). The arm's base is the
  tabletop's origin, on the table top.
* **Finger motors ↔ pads.** The gripper motor's left-finger position (URDF travel 0.015–0.037 m)
  is mapped linearly onto the pads' travel (0.010–0.035 m from the centre), so a closed gripper is
  closed for the objects. While the motor closes (negative PWM, torque on) the pads are driven
  ``SQUEEZE_M`` past it, so they grip with a force (the PWM's squeeze); when the pads stop on an
  object short of where they are driven, the motor is told there is an object of that width
  (:meth:`~.motors.WidowXMotors.place_object`), so the finger the driver reads stops where the
  object stops it. Opening, or the object slipping out, clears it.
* **Privileged state** (what rests where, what is grasped) comes from the tabletop's own contact
  rules, so the same scoring and verifiers as in simulation read it.

Not modelled: the objects never push back on the arm's joints (the gantry's servos give way, the
motors do not: an arm pressed into the table keeps its joint positions), the arm's links are not in
the scene (only the gripper collides and is rendered), and the physics falls behind the wall clock
when the CPU cannot keep up (skipped time is counted in :attr:`TwinWorld.skipped_s`).
"""

from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass
from typing import Callable

import numpy as np

from ladder_ros.core.errors import ConfigError, InvalidInputError
from ladder_ros.core.observation import PrivilegedState
from ladder_ros.core.rotations import euler_xyz_to_matrix, matrix_to_euler_xyz
from ladder_ros.core.suite import TaskSuite
from ladder_ros.core.task import Task
from ladder_ros.robots import wx250s
# The tabletop module chooses the offscreen GL backend (MUJOCO_GL) before MuJoCo is first imported.
from ladder_ros.sim.mujoco_tabletop import PHYSICS_TIMESTEP_S, MujocoTabletop
from ladder_ros.sim.tabletop_scene import FINGER_MAX_M, FINGER_MIN_M
from ladder_ros.instruments.widowx_twin.motors import FINGER_LOWER_M, FINGER_UPPER_M, WidowXMotors, finger_position

import mujoco  # noqa: E402,I100  (after the tabletop module set MUJOCO_GL)

# The WidowX's ee_gripper_link pointing straight down (bridge_data_robot's DEFAULT_ROTATION; the same
# matrix as ladder_ros.policies.state.WIDOWX_TOP_DOWN, which sim may not import).
WIDOWX_TOP_DOWN = np.array([[0.0, 0.0, 1.0], [0.0, 1.0, 0.0], [-1.0, 0.0, 0.0]])
SQUEEZE_M = 0.008  # pads driven this far past a closing finger: 600 N/m x 8 mm = 4.8 N per pad (tabletop servo)
BLOCKED_M = 0.002  # pads this far short of where they are driven: an object stops them (free, they lag < 0.5 mm)
MAX_CATCH_UP_S = 0.1  # physics further behind the wall clock than this skips the rest (counted)
# The gripper stand-in turned further than this from the arm's pose (its hinges pushed or stuck): counted as time,
# so a recording shows when the scene's gripper was not where the arm holds it (a pad pressed on the table only
# shifts it).
TURNED_OFF_ARM_RAD = 0.2


def pad_from_finger(finger_m: float) -> float:
    """The pads' joint position for the motor's left-finger position (the two travels mapped end to end)."""
    fraction = (finger_m - FINGER_LOWER_M) / (FINGER_UPPER_M - FINGER_LOWER_M)
    return FINGER_MIN_M + fraction * (FINGER_MAX_M - FINGER_MIN_M)


def finger_from_pad(pad_m: float) -> float:
    fraction = (pad_m - FINGER_MIN_M) / (FINGER_MAX_M - FINGER_MIN_M)
    return FINGER_LOWER_M + fraction * (FINGER_UPPER_M - FINGER_LOWER_M)


class TwinTabletop(MujocoTabletop):
    """The tabletop with its gripper driven from outside (the arm's kinematics), not by 7-D actions."""

    def keep(self, task: Task) -> None:
        """Hand the scene as it stands to ``task`` (a later episode of its scene): nothing moves, the physics goes
        on (the gripper stays where the arm holds it, unlike the tabletop's own ``keep_scene``, which drives it
        home)."""
        built, current = self._built, self._task
        if built is None or current is None:
            raise InvalidInputError("there is no scene to keep yet; build a layout first")
        if task.scene != current.scene:
            raise ConfigError(f"task {task.task_id!r} is set in scene {task.scene!r}, but the scene kept from "
                              f"task {current.task_id!r} is {current.scene!r}")
        missing = sorted(set(self.scenes[task.scene].kinds_for(task)) - set(built.object_kinds))
        if missing:
            raise ConfigError(f"task {task.task_id!r} needs objects the kept scene does not hold: {missing}")
        self._task = task
        self._step = 0

    def place_gripper(self, position: np.ndarray, euler: np.ndarray, pad_m: float) -> None:
        """Put the gripper there at rest (after a reset: the arm is wherever it is)."""
        built, data = self._built, self._data
        if built is None or data is None:
            raise InvalidInputError("no scene is built yet; call reset() first")
        data.qpos[built.joint_qpos[:3]] = position
        data.qpos[built.joint_qpos[3:6]] = euler
        data.qpos[built.joint_qpos[6:]] = pad_m
        data.qvel[:] = 0.0
        data.ctrl[:] = (*position, *euler, pad_m, pad_m)
        mujoco.mj_forward(built.model, data)

    def drive(self, position: np.ndarray, euler: np.ndarray, pad_target_m: float, substeps: int) -> None:
        """Servo the gripper towards the pose and the pads towards ``pad_target_m`` for ``substeps`` physics steps."""
        built, data = self._built, self._data
        assert built is not None and data is not None
        # The hinges are unbounded: turn the shortest way from where they are (no full turn at +-pi).
        current = data.qpos[built.joint_qpos[3:6]]
        euler = current + (np.asarray(euler) - current + math.pi) % (2 * math.pi) - math.pi
        data.ctrl[:] = (*position, *euler, pad_target_m, pad_target_m)
        mujoco.mj_step(built.model, data, nstep=substeps)

    def pads(self) -> float:
        """Where the pads are (m from the centre, the mean of both)."""
        built, data = self._built, self._data
        assert built is not None and data is not None
        return float(data.qpos[built.joint_qpos[6:]].mean())

    def gripper_euler(self) -> np.ndarray:
        built, data = self._built, self._data
        assert built is not None and data is not None
        return data.qpos[built.joint_qpos[3:6]].copy()

    def privileged(self) -> PrivilegedState:
        return self._privileged()

    @property
    def built_model(self) -> mujoco.MjModel | None:
        """The model of the current scene, None before the first reset."""
        return self._built.model if self._built is not None else None


@dataclass(frozen=True)
class ArmNow:
    """The arm at one instant, from the motors: the end effector (4x4, base frame), the pads' place, their goal."""

    pose: np.ndarray
    pad_m: float
    pad_target_m: float
    closing: bool


class TwinWorld:
    """The scene of the current episode, advanced on the wall clock by :meth:`advance` (or its own thread)."""

    def __init__(self, suite: TaskSuite, motors: WidowXMotors, motor_lock: threading.RLock, *, image_size: int,
                 physics_period_s: float = 0.02, clock: Callable[[], float] = time.monotonic):
        if not PHYSICS_TIMESTEP_S <= physics_period_s <= 0.5:
            raise ConfigError(f"physics_period_s must be in [{PHYSICS_TIMESTEP_S}, 0.5] s, got {physics_period_s!r}")
        self.tabletop = TwinTabletop(suite, render=False, image_size=image_size)
        self.motors, self.motor_lock, self.clock = motors, motor_lock, clock
        self.chain = wx250s.chain()
        self.physics_period_s = physics_period_s
        self.lock = threading.RLock()  # the scene; taken before the motor lock, never after it
        self.task: Task | None = None
        self.model_version = 0  # a new model (another scene): renderers rebuild
        self._sim_t = 0.0
        self.skipped_s = 0.0
        self.substeps = 0
        self.blocked_fingers = 0  # times an object stopped the closing fingers
        self.turned_off_arm_s = 0.0  # time the gripper stand-in was turned > TURNED_OFF_ARM_RAD from the arm's pose
        self.turned_off_arm_max_rad = 0.0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------------ the arm, from the motors
    def arm_at(self, t: float) -> ArmNow:
        """Under the motor lock: where the motors put the gripper at time ``t``."""
        joints = np.array([self.motors.arm[name].state(t)[0] for name in wx250s.JOINT_NAMES])
        gripper = self.motors.gripper
        finger = finger_position(gripper.state(t)[0])
        closing = gripper.speed() < 0.0  # pushed closed (torque on, negative PWM), also while stopped on an object
        pad = pad_from_finger(finger)
        return ArmNow(self.chain.forward(joints), pad, pad - SQUEEZE_M if closing else pad, closing)

    def target_position(self) -> np.ndarray:
        """The end effector where the motors' goals put it (the arm's commanded target), base frame."""
        with self.motor_lock:
            now = self.clock()
            goals = [m.goal if m.goal is not None else m.state(now)[0] for m in
                     (self.motors.arm[name] for name in wx250s.JOINT_NAMES)]
        return self.chain.forward(np.array(goals))[:3, 3]

    @staticmethod
    def _gripper_pose(pose: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return pose[:3, 3].copy(), matrix_to_euler_xyz(pose[:3, :3] @ WIDOWX_TOP_DOWN.T)

    # ------------------------------------------------------------------ episodes
    def reset(self, task: Task, layout: int, seed: int, *, keep_scene: bool = False) -> None:
        """Build ``task``'s scene in ``layout`` around the arm where it is now; with ``keep_scene`` the scene stays
        as the last episode left it (nothing is teleported) and ``task`` takes it over."""
        if keep_scene:
            with self.lock:
                self.tabletop.keep(task)
                self.task = task
            return
        with self.lock:
            previous = self.tabletop.built_model
            self.tabletop.reset(task, layout, seed)
            if self.tabletop.built_model is not previous:
                self.model_version += 1
            now = self.clock()
            with self.motor_lock:
                arm = self.arm_at(now)
            position, euler = self._gripper_pose(arm.pose)
            self.tabletop.place_gripper(position, euler, arm.pad_m)
            self.task = task
            self._sim_t = now

    @property
    def ready(self) -> bool:
        return self.task is not None

    # ------------------------------------------------------------------ physics
    def advance(self, now: float | None = None) -> int:
        """Catch the physics up with ``now`` (the clock's); returns the substeps taken."""
        now = self.clock() if now is None else now
        with self.lock:
            if self.task is None:
                return 0
            behind = now - self._sim_t
            if behind > MAX_CATCH_UP_S:
                self.skipped_s += behind - MAX_CATCH_UP_S
                self._sim_t = now - MAX_CATCH_UP_S
                behind = MAX_CATCH_UP_S
            substeps = int(behind / PHYSICS_TIMESTEP_S)
            if substeps <= 0:
                return 0
            end = self._sim_t + substeps * PHYSICS_TIMESTEP_S
            with self.motor_lock:
                arm = self.arm_at(end)
            position, euler = self._gripper_pose(arm.pose)
            self.tabletop.drive(position, euler, arm.pad_target_m, substeps)
            self._sim_t = end
            self.substeps += substeps
            self._check_turn(euler, substeps)
            self._couple_fingers(arm)
            return substeps

    def _check_turn(self, euler: np.ndarray, substeps: int) -> None:
        """Count the time the gripper stand-in is turned away from where the arm holds it."""
        relative = euler_xyz_to_matrix(self.tabletop.gripper_euler()).T @ euler_xyz_to_matrix(euler)
        angle = math.acos(max(-1.0, min(1.0, (float(np.trace(relative)) - 1.0) / 2.0)))
        self.turned_off_arm_max_rad = max(self.turned_off_arm_max_rad, angle)
        if angle > TURNED_OFF_ARM_RAD:
            self.turned_off_arm_s += substeps * PHYSICS_TIMESTEP_S

    def _couple_fingers(self, arm: ArmNow) -> None:
        """Tell the finger motor where an object stops the pads, and forget it when it no longer does."""
        pads = self.tabletop.pads()
        with self.motor_lock:
            gripper = self.motors.gripper
            held = gripper.object_width_m
            if arm.closing:
                if held is None and pads > arm.pad_target_m + BLOCKED_M:  # the pads cannot go where they are driven
                    self.motors.place_object(finger_from_pad(pads))
                    self.blocked_fingers += 1
                elif held is not None and pads < pad_from_finger(held) - BLOCKED_M:
                    self.motors.place_object(None)  # it slipped out: the fingers close on
            elif held is not None and gripper.pwm > 0.0:
                self.motors.place_object(None)

    def privileged(self) -> PrivilegedState:
        with self.lock:
            return self.tabletop.privileged()

    def start(self) -> None:
        """Advance the physics on its own thread every ``physics_period_s``."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="twin-physics", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        next_at = self.clock()
        while not self._stop.is_set():
            self.advance()
            next_at = max(next_at + self.physics_period_s, self.clock())
            self._stop.wait(max(0.0, next_at - self.clock()))

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5.0)
            self._thread = None
        with self.lock:
            self.tabletop.close()
