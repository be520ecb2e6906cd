"""The built-in MuJoCo tabletop: a WidowX-like or Franka-like gripper over a table of objects and containers.

Why a floating gripper and not an arm: the suite must run its 24 layouts per task on a 2-core CPU
in CI, and nothing may be downloaded (no robot model packages). The stand-in is a gantry: three
slide joints and three hinges (roll, pitch, yaw, chained so the body rotation is
``Rx(roll) Ry(pitch) Rz(yaw)``) carry a palm with two slide fingers. Position servos track the
controller target, so a step costs a few milliseconds. What the loop sees is the WidowX Bridge
contract of SimplerEnv / ManiSkill3 (docs/conventions.md), not the arm's dynamics:

* control at 5 Hz; 0.2 s of physics per step (ManiSkill3 Bridge: ``control_freq=5``);
* the 7-D action ``[dx, dy, dz, droll, dpitch, dyaw, gripper]``: the translation (metres, base
  frame) is added to the previous *target* position, not the measured one; the rotation delta is
  Euler XYZ, ``R = Rx Ry Rz``, applied in the base frame to the previous target orientation
  (ManiSkill3 ``pd_ee_target_delta_pose`` with ``root_translation:root_aligned_body_rotation``);
  the target is clipped to the workspace bounds (Bridge practice);
* the gripper command is binarised as Bridge policies do, ``open = gripper > 0`` (``2*(g>0)-1``):
  +1 opens, -1 (or 0) closes; there is no sticky gripper;
* ``joint_positions`` are 6 gantry joints + 2 fingers, like ``agent/qpos`` (6 arm joints + 2
  fingers); the aperture normalises the mean finger position from 0.010-0.035 m (Interbotix
  WidowX) to [0, 1], 1 = open;
* the end-effector frame is the tool centre point between the pads; identity orientation points
  the fingers down, so ``ee_euler`` is (0, 0, yaw) for a top-down gripper;
* a 3rd-person camera image (256x256 RGB by default), or none when ``render=False``.

That is the WidowX stand-in (suites with ``embodiment: widowx``). A suite with ``embodiment:
franka`` gets the Franka stand-in of RoboLab-Long instead (:mod:`ladder_ros.sim.tabletop_embodiment`
gives every number and its source): the same contract at 15 Hz (1/15 s of physics per step); the
Franka Hand's fingers (0-0.04 m each, an 80 mm opening, franka_description's rubber fingertips) under
its housing; the gripper command read as a width, ``(g + 1) / 2`` of the stroke, reached at the
hand's 0.1 m/s; the aperture the opening width over 0.08 m (as the Franka driver reports it);
``joint_positions`` the six gantry joints and ``panda_finger_joint1``/``2``; the home pose DROID's
reset pose, the tool centre 0.39 m above the table with the fingers turned -45 degrees; a larger
workspace in front of the base. The end-effector height the Franka trigger's lift rule reads is the
tool centre's z in ``ee_position``, as on the robot. It has the hand, not the arm, so joint-position
actions (pi0.5-DROID's) are refused before anything starts (:func:`ladder_ros.sim.registry.check_action_kind`).

Privileged facts (``Observation.privileged``) come from poses and contacts: an instance is
*grasped* when both pads touch it; it *rests* on a container when it touches no part of the
gripper, its centre lies over the container's resting surface (a plate's disc, a cloth's sheet, a
bin's floor inside its walls), its centre is no lower than that surface and at most one object
height above it (a pile counts), and it moves slower than 0.1 m/s.

A scene's start regions (``start_regions``, :mod:`ladder_ros.sim.tabletop_scene`) are flat areas of the table
with no body in the model, so they change neither the physics nor the image: they appear in the privileged state
as flat destinations (``PrivilegedState.regions``, surface at the table top), and an object that rests on no
container rests in a region when its centre lies over the area by the same rule, so ``GoalState.count(kind,
region)`` counts them. ``reset(task, layout, seed, keep_scene=True)`` starts the next episode from the scene the
last one left (the objects stay where they are, the gripper drives home through the physics), as an automatic
reset needs: nothing is teleported.

Rendering is offscreen on the CPU: ``MUJOCO_GL=egl`` (Mesa llvmpipe) unless the variable is set,
OSMesa when EGL is missing or gives no context, and a clear error naming ``render=False`` when
neither works. ``scripts/validate_tabletop_layouts.py --benchmark`` prints the cost per step.

Determinism: no wall clock and no global random state; the model and data are rebuilt from the
task, the layout index and the actions only, so the same inputs give bit-identical observations
(MuJoCo is deterministic for identical inputs on one machine). ``seed`` is accepted by ``reset``
for the interface's sake; layouts depend on the task id and the layout index only, so a layout
validated once stays valid for every seed.
"""

from __future__ import annotations

import ctypes.util
import importlib
import math
import os
from dataclasses import dataclass
from typing import Any

import numpy as np

if "MUJOCO_GL" not in os.environ:
    # Offscreen rendering on a headless CPU: EGL (Mesa llvmpipe) when present, else OSMesa.
    os.environ["MUJOCO_GL"] = "egl" if ctypes.util.find_library("EGL") else "osmesa"

import mujoco  # noqa: E402  (MUJOCO_GL must be set before the import)

from ladder_ros.core.errors import ConfigError, InvalidInputError  # noqa: E402
from ladder_ros.core.goals import GoalState  # noqa: E402
from ladder_ros.core.observation import ContainerInfo, ObjectPose, Observation, PrivilegedState  # noqa: E402
from ladder_ros.core.reset import ResetScene  # noqa: E402
from ladder_ros.core.suite import TaskSuite  # noqa: E402
from ladder_ros.core.task import LADDER_RULE, Task  # noqa: E402
from ladder_ros.core.action_conventions import validate_action  # noqa: E402
from ladder_ros.camera.model import CameraIntrinsics
# The one tested place for the Euler XYZ convention (plain numpy).
from ladder_ros.core.rotations import euler_xyz_to_matrix, matrix_to_euler_xyz, matrix_to_quaternion  # noqa: E402
from ladder_ros.sim.tabletop_embodiment import (  # noqa: E402
    WIDOWX_GRIPPER,
    Servo,
    TabletopEmbodiment,
    embodiment_for,
)
from ladder_ros.sim.tabletop_scene import (  # noqa: E402
    BIN_FLOOR_HALF_THICKNESS_M,
    BIN_WALL_HALF_THICKNESS_M,
    CLOTH_HALF_THICKNESS_M,
    PLATE_HALF_HEIGHT_M,
    Layout,
    PlacedContainer,
    SceneSpec,
    check_layout_index,
    parse_scenes,
    reset_scene,
    sample_layout,
)

# The WidowX stand-in's numbers (tabletop_embodiment.py cites them); a backend reads its own suite's
# embodiment, these stay for the callers that ask the WidowX stand-in directly.
CONTROL_RATE_HZ = WIDOWX_GRIPPER.control_rate_hz
PHYSICS_TIMESTEP_S = WIDOWX_GRIPPER.physics_timestep_s
SUBSTEPS = WIDOWX_GRIPPER.substeps
SETTLE_AT_RESET_S = 0.3  # objects come to rest before step 0
SETTLE_STEPS_AT_RESET = int(round(SETTLE_AT_RESET_S / PHYSICS_TIMESTEP_S))
HOMING_MAX_S = 3.0  # a kept scene's gripper drives home for at most this long before step 0
HOMING_TOLERANCE_M = 0.003

JOINT_NAMES = WIDOWX_GRIPPER.joint_names
HOME_TCP = np.array(WIDOWX_GRIPPER.home_tcp)
EULER_LOW = np.array(WIDOWX_GRIPPER.euler_low)
EULER_HIGH = np.array(WIDOWX_GRIPPER.euler_high)
RESTING_MAX_SPEED_M_S = 0.1  # slower than this: not falling, sliding or rolling away (a drop settles in < 0.3 s)
RESTING_STACK_ALLOWANCE_M = 0.04  # about one object height (<= 0.05 m): an object on another one still rests

DEFAULT_IMAGE_SIZE = 256
CAMERA_POSITION = np.array(WIDOWX_GRIPPER.camera_position)
CAMERA_TARGET = np.array(WIDOWX_GRIPPER.camera_target)
CAMERA_FOVY_DEG = WIDOWX_GRIPPER.camera_fovy_deg  # vertical field of view (MuJoCo cameras are ideal pinholes)


# ----------------------------------------------------------------------------- camera


def _lookat_xyaxes(position: np.ndarray, target: np.ndarray) -> str:
    forward = target - position
    forward /= np.linalg.norm(forward)
    x_axis = np.cross(forward, np.array([0.0, 0.0, 1.0]))
    x_axis /= np.linalg.norm(x_axis)
    y_axis = np.cross(x_axis, forward)
    return " ".join(f"{v:.6f}" for v in (*x_axis, *y_axis))


# ----------------------------------------------------------------------------- MJCF


def _fmt(values: Any) -> str:
    return " ".join(f"{float(v):.6g}" for v in np.atleast_1d(values))


def _container_xml(c: PlacedContainer) -> str:
    name, rgba = c.spec.name, _fmt(c.spec.rgba)
    parts = [f'<body name="container_{name}" mocap="true" pos="{_fmt(c.position)}">']
    if c.spec.type == "plate":
        parts.append(f'<geom name="container_{name}" type="cylinder" size="{c.size[0]:.6g} {PLATE_HALF_HEIGHT_M}" '
                     f'pos="0 0 {PLATE_HALF_HEIGHT_M}" rgba="{rgba}"/>')
    elif c.spec.type == "cloth":
        parts.append(f'<geom name="container_{name}" type="box" size="{c.size[0]:.6g} {c.size[1]:.6g} '
                     f'{CLOTH_HALF_THICKNESS_M}" pos="0 0 {CLOTH_HALF_THICKNESS_M}" rgba="{rgba}"/>')
    else:
        hx, hy, wall_h = c.size[0], c.size[1], c.spec.wall_height
        t = BIN_WALL_HALF_THICKNESS_M
        parts.append(f'<geom name="container_{name}" type="box" size="{hx:.6g} {hy:.6g} '
                     f'{BIN_FLOOR_HALF_THICKNESS_M}" pos="0 0 {BIN_FLOOR_HALF_THICKNESS_M}" rgba="{rgba}"/>')
        for i, (px, py, sx, sy) in enumerate(((hx - t, 0, t, hy), (-hx + t, 0, t, hy),
                                              (0, hy - t, hx, t), (0, -hy + t, hx, t))):
            parts.append(f'<geom name="container_{name}_wall{i}" type="box" size="{sx:.6g} {sy:.6g} '
                         f'{wall_h / 2:.6g}" pos="{px:.6g} {py:.6g} {wall_h / 2:.6g}" rgba="{rgba}"/>')
    parts.append("</body>")
    return "\n".join(parts)


def _object_xml(name: str, shape: str, size: tuple[float, ...], rgba: tuple[float, ...], mass: float) -> str:
    # Torsional and rolling friction (condim 6) keep capsules and cylinders from rolling away.
    common = f'name="{name}" mass="{mass:.6g}" rgba="{_fmt(rgba)}" condim="6" friction="1.0 0.005 0.002"'
    if shape == "box":
        geom = f'<geom type="box" size="{_fmt(size)}" {common}/>'
    elif shape == "cylinder":
        geom = f'<geom type="cylinder" size="{_fmt(size)}" {common}/>'
    else:
        r, half = size
        geom = f'<geom type="capsule" fromto="{-half:.6g} 0 0 {half:.6g} 0 0" size="{r:.6g}" {common}/>'
    return f'<body name="{name}"><freejoint name="{name}"/>{geom}</body>'


def _finger_xml(e: TabletopEmbodiment, side: str, sign: int) -> str:
    """One finger: a slide along +-y whose pad's inner face is at the joint position (and its stem)."""
    pad = f'size="{_fmt(e.pad_half)}" pos="0 {sign * e.pad_half[1]:g} {e.pad_centre_z:g}" mass="{e.pad_mass:g}"'
    stem = ""
    if e.stem_half is not None:
        stem = (f'\n        <geom name="{side}_stem" type="box" size="{_fmt(e.stem_half)}" '
                f'pos="0 {sign * e.stem_offset[0]:g} {e.stem_offset[1]:g}" mass="0.001" rgba="0.85 0.85 0.85 1"/>')
    axis = "0 1 0" if sign > 0 else "0 -1 0"
    contact = f" {e.pad_contact}" if e.pad_contact else ""
    travel = f"{e.finger_min_m} {e.finger_max_m}"
    return f"""      <body name="{side}_finger" gravcomp="1">
        <joint name="{side}_finger" type="slide" axis="{axis}" range="{travel}" armature="0.01"/>
        <geom name="{side}_pad" type="box" {pad}
              friction="1.5 0.01 0.001" condim="4"{contact} rgba="0.3 0.3 0.3 1"/>{stem}
      </body>"""


def _servo_xml(name: str, joint: str, servo: Servo) -> str:
    return (f'<position name="{name}" joint="{joint}" kp="{servo.kp:g}" kv="{servo.kv:g}" '
            f'forcerange="{-servo.force:g} {servo.force:g}"/>')


def build_mjcf(layout: Layout, image_size: int, embodiment: TabletopEmbodiment = WIDOWX_GRIPPER) -> str:
    """The MJCF of one task's scene; object poses and container positions are set at reset."""
    e = embodiment
    containers = "\n".join(_container_xml(c) for c in layout.containers)
    objects = "\n".join(_object_xml(o.name, o.spec.shape, o.spec.size, o.spec.rgba, o.spec.mass)
                        for o in layout.objects)
    offscreen = max(image_size, 64)
    camera = np.array(e.camera_position)
    servos = "\n    ".join(
        [_servo_xml(f"act_{axis}", f"gantry_{axis}", e.translation_servo) for axis in "xyz"]
        + [_servo_xml(f"act_{axis}", f"gantry_{axis}", e.rotation_servo) for axis in ("roll", "pitch", "yaw")]
        + [_servo_xml(f"act_{side}", f"{side}_finger", e.finger_servo) for side in ("left", "right")])
    wrist_z = max(0.1, e.palm_centre_z + e.palm_half[2] + 0.05)  # a link above the palm (seen, never touched)
    return f"""
<mujoco model="ladder_tabletop">
  <compiler angle="radian" autolimits="true"/>
  <!-- implicitfast integrates the servo damping stably; elliptic cones with impratio > 1 stop
       grasped objects slipping (MuJoCo documentation, 'Computation: friction cones'). -->
  <option timestep="{e.physics_timestep_s}" integrator="implicitfast" cone="elliptic" impratio="5"/>
  <visual>
    <global offwidth="{offscreen}" offheight="{offscreen}"/>
    <quality shadowsize="0"/>
  </visual>
  <worldbody>
    <light name="sun" directional="true" pos="0.3 -0.2 1.5" dir="0 0.15 -1" castshadow="false"/>
    <geom name="floor" type="plane" pos="0 0 -0.75" size="2 2 0.1" rgba="0.35 0.33 0.3 1"/>
    <geom name="table" type="box" pos="{_fmt(e.table_centre)}" size="{_fmt(e.table_half)}" rgba="0.62 0.5 0.38 1"/>
    <geom name="robot_base" type="cylinder" pos="0 0 0.03" size="0.05 0.03" rgba="0.1 0.1 0.1 1"
          contype="0" conaffinity="0"/>
    <camera name="3rd_view" pos="{_fmt(camera)}"
            xyaxes="{_lookat_xyaxes(camera, np.array(e.camera_target))}" fovy="{e.camera_fovy_deg:g}"/>
    <body name="gripper" gravcomp="1">
      <joint name="gantry_x" type="slide" axis="1 0 0" armature="0.5"/>
      <joint name="gantry_y" type="slide" axis="0 1 0" armature="0.5"/>
      <joint name="gantry_z" type="slide" axis="0 0 1" armature="0.5"/>
      <joint name="gantry_roll" type="hinge" axis="1 0 0" armature="0.01"/>
      <joint name="gantry_pitch" type="hinge" axis="0 1 0" armature="0.01"/>
      <joint name="gantry_yaw" type="hinge" axis="0 0 1" armature="0.01"/>
      <inertial pos="0 0 0.05" mass="{e.carriage_mass:g}" diaginertia="0.001 0.001 0.001"/>
      <site name="tcp" pos="0 0 0" size="0.004" rgba="1 0 0 0"/>
      <geom name="palm" type="box" size="{_fmt(e.palm_half)}" pos="0 0 {e.palm_centre_z:g}" rgba="0.15 0.15 0.15 1"/>
      <geom name="wrist" type="cylinder" size="0.02 0.05" pos="0 0 {wrist_z:g}" rgba="0.15 0.15 0.15 1"
            contype="0" conaffinity="0"/>
{_finger_xml(e, "left", 1)}
{_finger_xml(e, "right", -1)}
    </body>
    {containers}
    {objects}
  </worldbody>
  <actuator>
    <!-- Servo gains and forces: ladder_ros/sim/tabletop_embodiment.py says why, per embodiment. -->
    {servos}
  </actuator>
</mujoco>
"""


# ----------------------------------------------------------------------------- the backend


@dataclass
class _BuiltScene:
    """A compiled model with the index tables the step loop needs."""

    model: mujoco.MjModel
    object_names: tuple[str, ...]
    object_kinds: tuple[str, ...]
    object_qpos: np.ndarray  # (n, 7) qpos addresses of each free joint
    object_qvel: np.ndarray  # (n,) first qvel address of each free joint
    object_max_half_extent: np.ndarray
    geom_to_object: np.ndarray  # geom id -> object index or -1
    pad_geoms: tuple[int, int]
    gripper_geoms: np.ndarray
    joint_qpos: np.ndarray
    tcp_site: int
    container_mocap: dict[str, int]


def _compile(layout: Layout, image_size: int, embodiment: TabletopEmbodiment) -> _BuiltScene:
    model = mujoco.MjModel.from_xml_string(build_mjcf(layout, image_size, embodiment))
    names = tuple(o.name for o in layout.objects)
    qpos = np.array([[model.jnt_qposadr[model.joint(n).id] + i for i in range(7)] for n in names],
                    dtype=np.int64).reshape(len(names), 7)
    qvel = np.array([model.jnt_dofadr[model.joint(n).id] for n in names], dtype=np.int64)
    geom_to_object = np.full(model.ngeom, -1, dtype=np.int64)
    for i, n in enumerate(names):
        geom_to_object[model.geom(n).id] = i
    max_half = np.array([o.spec.max_half_extent for o in layout.objects])
    pads = (model.geom("left_pad").id, model.geom("right_pad").id)
    stems = [model.geom(f"{side}_stem").id for side in ("left", "right")] if embodiment.stem_half else []
    gripper = np.array([model.geom("palm").id, *pads, *stems], dtype=np.int64)
    return _BuiltScene(
        model=model, object_names=names, object_kinds=tuple(o.spec.kind for o in layout.objects),
        object_qpos=qpos, object_qvel=qvel, object_max_half_extent=max_half,
        geom_to_object=geom_to_object, pad_geoms=pads, gripper_geoms=gripper,
        joint_qpos=np.array([model.jnt_qposadr[model.joint(j).id]
                             for j in (*embodiment.joint_names[:6], "left_finger", "right_finger")], dtype=np.int64),
        tcp_site=model.site("tcp").id,
        container_mocap={c.spec.name: int(model.body_mocapid[model.body(f"container_{c.spec.name}").id])
                         for c in layout.containers},
    )


def _renderer_error(exc: Exception) -> InvalidInputError:
    return InvalidInputError(
        f"cannot create an offscreen renderer with MUJOCO_GL={os.environ.get('MUJOCO_GL')!r}: {exc}; "
        "install Mesa EGL (libegl1) or OSMesa (libosmesa6), or run with render=False")


def _switch_gl_backend(name: str) -> bool:
    """Make new renderers use the ``name`` GL backend; False when it is in use or not installed."""
    from mujoco.rendering.classic import gl_context

    if getattr(gl_context, "_MUJOCO_GL", "") == name:
        return False
    try:
        context_class = importlib.import_module(f"mujoco.{name}").GLContext
    except Exception:  # a missing library surfaces as ImportError, OSError or AttributeError
        return False
    gl_context.GLContext = context_class
    gl_context._MUJOCO_GL = name
    os.environ["MUJOCO_GL"] = name
    return True


def _use_offscreen_gl() -> None:
    """Render offscreen even when MuJoCo was imported before ``MUJOCO_GL`` was set.

    MuJoCo picks its GL backend when it is first imported; a process that imported it earlier
    without ``MUJOCO_GL`` (a test runner, another module) gets GLFW, which needs a display. On a
    headless machine, switch the renderer's context class to the offscreen backend chosen above.
    """
    from mujoco.rendering.classic import gl_context

    chosen = os.environ.get("MUJOCO_GL", "").lower()
    if getattr(gl_context, "_MUJOCO_GL", chosen) or os.environ.get("DISPLAY") or chosen not in ("egl", "osmesa"):
        return
    _switch_gl_backend(chosen)


def _yaw_quaternion(yaw: float) -> np.ndarray:
    return np.array([math.cos(yaw / 2), 0.0, 0.0, math.sin(yaw / 2)])


class MujocoTabletop:
    """The tabletop simulator behind :class:`~ladder_ros.sim.base.SimulatorBackend`.

    ``render`` turns the camera image on or off (evaluation with a privileged verifier needs no
    image); ``image_size`` is the square image's side in pixels; ``render_depth`` adds the camera's
    exact depth (float32 metres along the optical axis, from MuJoCo's depth buffer) to each
    observation, the truth that estimated depth is scored against.

    The suite's ``embodiment`` (a preset name) chooses the gripper stand-in
    (:func:`~ladder_ros.sim.tabletop_embodiment.embodiment_for`): its control rate, fingers, gripper
    command, workspace, table and camera; the scenes are sized for it.
    """

    name = "mujoco_tabletop"
    control_rate_hz = CONTROL_RATE_HZ  # the WidowX stand-in's; an instance has its embodiment's
    keeps_scene = True  # reset(..., keep_scene=True) continues from the scene the last episode left

    def __init__(self, suite: TaskSuite, *, render: bool = True, image_size: int = DEFAULT_IMAGE_SIZE,
                 render_depth: bool = False):
        for name, value in (("render", render), ("render_depth", render_depth)):
            if not isinstance(value, bool):
                raise ConfigError(f"{name} must be true or false, got {value!r}")
        if isinstance(image_size, bool) or not isinstance(image_size, int) or not 16 <= image_size <= 2048:
            raise ConfigError(f"image_size must be an integer in [16, 2048] pixels, got {image_size!r}")
        stock = [t.task_id for t in suite.tasks if t.success_rule != LADDER_RULE]
        if stock:
            raise ConfigError(f"tasks {stock} are scored by a SimplerEnv env's own success check "
                              "(success_rule simplerenv), which the MuJoCo tabletop does not have",
                              source=suite.source)
        self.suite = suite
        self.embodiment = embodiment_for(suite.embodiment)
        self.control_rate_hz = self.embodiment.control_rate_hz
        self.scenes: dict[str, SceneSpec] = parse_scenes(suite.scenes, self.embodiment)
        self.render = render
        self.render_depth = render_depth
        self.image_size = image_size
        self._cache: dict[tuple, _BuiltScene] = {}
        self._layouts: dict[tuple[Task, int], Layout] = {}  # sampling a crowded layout takes milliseconds
        self._built: _BuiltScene | None = None
        self._data: mujoco.MjData | None = None
        self._renderer: Any = None
        self._renderer_model: mujoco.MjModel | None = None
        self._layout: Layout | None = None
        self._task: Task | None = None
        self._target_pos = np.array(self.embodiment.home_tcp)
        self._target_euler = np.array(self.embodiment.home_euler)
        self._finger_target = self.embodiment.finger_open_target_m
        self._step = 0
        self._containers: dict[str, ContainerInfo] = {}
        self._placed_containers: tuple[PlacedContainer, ...] = ()
        self._regions: dict[str, ContainerInfo] = {}
        self._region_specs: tuple = ()

    # -- SimulatorBackend -------------------------------------------------------------

    def reset(self, task: Task, layout: int, seed: int, *, keep_scene: bool = False) -> Observation:
        """Build ``task``'s scene in layout ``layout``; ``seed`` is recorded, layouts ignore it.

        With ``keep_scene`` the scene the last episode left stays as it is and ``task`` takes it over (its
        objects must be there): the gripper drives home through the physics, then step 0 is observed.
        """
        if task.scene not in self.scenes:
            raise ConfigError(f"task {task.task_id!r} uses scene {task.scene!r}, which suite "
                              f"{self.suite.name!r} does not define; valid: {', '.join(sorted(self.scenes))}")
        if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
            raise InvalidInputError(f"seed must be an integer, got {seed!r}")
        if keep_scene:
            return self._continue(task)
        index = check_layout_index(task, layout)
        placed = self._layouts.get((task, index))
        if placed is None:
            placed = self._layouts[(task, index)] = sample_layout(self.scenes[task.scene], task, index)
        key = (task.scene, tuple(o.name for o in placed.objects),
               tuple((c.spec.name, c.size) for c in placed.containers))
        if key not in self._cache:
            self._cache[key] = _compile(placed, self.image_size, self.embodiment)
        built = self._cache[key]
        self._built, self._layout, self._task = built, placed, task
        model = built.model
        data = mujoco.MjData(model)
        for c in placed.containers:
            data.mocap_pos[built.container_mocap[c.spec.name]] = c.position
        for i, o in enumerate(placed.objects):
            data.qpos[built.object_qpos[i, :3]] = o.position
            data.qpos[built.object_qpos[i, 3:]] = _yaw_quaternion(o.yaw)
        e = self.embodiment
        self._target_pos = np.array(e.home_tcp)
        self._target_euler = np.array(e.home_euler)
        self._finger_target = e.finger_open_target_m
        data.qpos[built.joint_qpos[:3]] = self._target_pos
        data.qpos[built.joint_qpos[3:6]] = self._target_euler
        data.qpos[built.joint_qpos[6:]] = e.finger_max_m
        self._apply_targets(data)
        mujoco.mj_forward(model, data)
        mujoco.mj_step(model, data, nstep=int(round(SETTLE_AT_RESET_S / e.physics_timestep_s)))
        self._data = data
        self._step = 0
        self._placed_containers = placed.containers
        self._containers = {
            c.spec.name: ContainerInfo(name=c.spec.name, position=c.position.copy(),
                                       half_extents=c.half_extents, surface_z=c.surface_z)
            for c in placed.containers
        }
        self._region_specs = tuple(self.scenes[task.scene].start_regions.values())
        self._regions = {r.name: ContainerInfo(name=r.name, position=r.position, half_extents=r.half_extents,
                                               surface_z=0.0) for r in self._region_specs}
        if self.render or self.render_depth:
            self._ensure_renderer(model)
        return self._observe()

    def _continue(self, task: Task) -> Observation:
        """Hand the scene as it stands to ``task`` and drive the gripper home, open, through the physics."""
        built, data, current = self._built, self._data, self._task
        if built is None or data is None or current is None:
            raise InvalidInputError("keep_scene needs a scene to keep; reset a layout first")
        if task.scene != current.scene:
            raise ConfigError(f"task {task.task_id!r} is set in scene {task.scene!r}, but the scene kept from "
                              f"task {current.task_id!r} is {current.scene!r}")
        missing = sorted(set(self.scenes[task.scene].kinds_for(task)) - set(built.object_kinds))
        if missing:
            raise ConfigError(f"task {task.task_id!r} needs objects the kept scene does not hold: {missing}")
        e = self.embodiment
        self._task = task
        self._target_pos = np.array(e.home_tcp)
        self._target_euler = np.array(e.home_euler)
        self._finger_target = e.finger_open_target_m
        self._apply_targets(data)
        for _ in range(int(round(HOMING_MAX_S * e.control_rate_hz))):
            if np.linalg.norm(data.site_xpos[built.tcp_site] - self._target_pos) < HOMING_TOLERANCE_M:
                break
            mujoco.mj_step(built.model, data, nstep=e.substeps)
        mujoco.mj_step(built.model, data, nstep=int(round(SETTLE_AT_RESET_S / e.physics_timestep_s)))
        self._step = 0
        return self._observe()

    def reset_scene(self, task: Task) -> ResetScene:
        """Start regions and object counts of ``task``'s scene, for :func:`ladder_ros.core.reset.plan_reset`."""
        if task.scene not in self.scenes:
            raise ConfigError(f"task {task.task_id!r} uses scene {task.scene!r}, which suite "
                              f"{self.suite.name!r} does not define; valid: {', '.join(sorted(self.scenes))}")
        return reset_scene(self.scenes[task.scene], task)

    def step(self, action: np.ndarray) -> Observation:
        """Apply one action for one control period of physics and return the next observation."""
        if self._data is None or self._built is None:
            raise InvalidInputError("step() called before reset()")
        act = validate_action(action)
        e = self.embodiment
        self._target_pos = np.clip(self._target_pos + act[:3], e.workspace_low, e.workspace_high)
        rotation = euler_xyz_to_matrix(act[3:6]) @ euler_xyz_to_matrix(self._target_euler)
        self._target_euler = np.clip(matrix_to_euler_xyz(rotation), e.euler_low, e.euler_high)
        wanted = e.finger_target(float(act[6]))
        if e.finger_speed_m_s is None:
            self._finger_target = wanted
        else:  # the hand moves its fingers at a set speed
            reach = e.finger_speed_m_s / e.control_rate_hz
            self._finger_target += float(np.clip(wanted - self._finger_target, -reach, reach))
        self._apply_targets(self._data)
        mujoco.mj_step(self._built.model, self._data, nstep=e.substeps)
        self._step += 1
        return self._observe()

    def close(self) -> None:
        """Free the renderer's GL context and the compiled models."""
        if self._renderer is not None:
            self._renderer.close()
        self._renderer = None
        self._renderer_model = None
        self._cache.clear()
        self._layouts.clear()
        self._built = None
        self._data = None

    # -- extras for tests, scripts and the bridge ---------------------------------------

    @property
    def layout(self) -> Layout | None:
        """The layout built by the last reset."""
        return self._layout

    @property
    def model(self) -> mujoco.MjModel:
        if self._built is None:
            raise InvalidInputError("no scene is built yet; call reset() first")
        return self._built.model

    @property
    def data(self) -> mujoco.MjData:
        if self._data is None:
            raise InvalidInputError("no scene is built yet; call reset() first")
        return self._data

    def camera_intrinsics(self) -> CameraIntrinsics:
        """The ``3rd_view`` camera: MuJoCo's vertical field of view spans the image height exactly.

        ``f = (height / 2) / tan(fovy / 2)`` for both axes (square pixels) and the principal point at
        the image centre, ``(size - 1) / 2`` in the pixel-centre convention of ``CameraInfo``.
        """
        size = self.image_size
        focal = (size / 2.0) / math.tan(math.radians(self.embodiment.camera_fovy_deg) / 2.0)
        centre = (size - 1) / 2.0
        return CameraIntrinsics(width=size, height=size, fx=focal, fy=focal, cx=centre, cy=centre)

    def render_image(self) -> np.ndarray:
        """Render the camera now (also when ``render=False``, e.g. for a video of one episode)."""
        self._ensure_renderer(self.model)
        self._renderer.update_scene(self.data, camera="3rd_view")
        return np.array(self._renderer.render(), dtype=np.uint8, copy=True)

    def render_depth_image(self) -> np.ndarray:
        """The camera's depth now: (H, W) float32 metres along the optical axis."""
        self._ensure_renderer(self.model)
        self._renderer.update_scene(self.data, camera="3rd_view")
        return self._depth_now()

    def _depth_now(self) -> np.ndarray:
        self._renderer.enable_depth_rendering()
        try:
            depth = np.array(self._renderer.render(), dtype=np.float32, copy=True)
        finally:
            self._renderer.disable_depth_rendering()
        # Pixels on the far clipping plane hit nothing: no depth (NaN, as REP 118 has it).
        model = self.model
        depth[depth >= 0.999 * model.vis.map.zfar * model.stat.extent] = np.nan
        return depth

    def __enter__(self) -> "MujocoTabletop":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- internals ----------------------------------------------------------------------

    def _ensure_renderer(self, model: mujoco.MjModel) -> None:
        if self._renderer is not None and self._renderer_model is model:
            return
        if self._renderer is not None:
            self._renderer.close()
            self._renderer = None
        _use_offscreen_gl()
        try:
            self._renderer = mujoco.Renderer(model, self.image_size, self.image_size)
        except Exception as egl_error:  # the GL backends raise several unrelated types
            if not _switch_gl_backend("osmesa"):
                raise _renderer_error(egl_error) from egl_error
            try:  # EGL is present but gives no context (no render node): OSMesa renders in software
                self._renderer = mujoco.Renderer(model, self.image_size, self.image_size)
            except Exception as exc:
                raise _renderer_error(exc) from exc
        self._renderer_model = model

    def _apply_targets(self, data: mujoco.MjData) -> None:
        finger = self._finger_target
        data.ctrl[:] = (*self._target_pos, *self._target_euler, finger, finger)

    def _observe(self) -> Observation:
        built, data = self._built, self._data
        assert built is not None and data is not None
        joints = data.qpos[built.joint_qpos].copy()
        aperture = self.embodiment.aperture(joints[6:])
        image = depth = None
        if self.render or self.render_depth:
            self._renderer.update_scene(data, camera="3rd_view")
        if self.render:
            image = np.array(self._renderer.render(), dtype=np.uint8, copy=True)
        if self.render_depth:
            depth = self._depth_now()
        return Observation(
            step=self._step,
            image=image,
            aperture=aperture,
            ee_position=data.site_xpos[built.tcp_site].copy(),
            # the base frame is the world frame, and the identity points the fingers down: the
            # top-down reference of ee_euler is the base frame itself
            ee_euler=matrix_to_euler_xyz(data.site_xmat[built.tcp_site].reshape(3, 3)),
            joint_names=self.embodiment.joint_names,
            joint_positions=joints,
            target_position=self._target_pos.copy(),
            privileged=self._privileged(),
            depth=depth,
            ee_quaternion=matrix_to_quaternion(data.site_xmat[built.tcp_site].reshape(3, 3)),
        )

    def _contacts(self) -> tuple[set[int], set[int], set[int]]:
        """Objects touching the left pad, the right pad, and any gripper geom."""
        built, data = self._built, self._data
        n = data.ncon
        left: set[int] = set()
        right: set[int] = set()
        gripper: set[int] = set()
        if n == 0:
            return left, right, gripper
        geoms = np.array([data.contact.geom1[:n], data.contact.geom2[:n]]).T
        objects = built.geom_to_object[geoms]
        grip_mask = np.isin(geoms, built.gripper_geoms)
        for k in range(n):
            for side in (0, 1):
                obj, other = objects[k, side], geoms[k, 1 - side]
                if obj < 0 or not grip_mask[k, 1 - side]:
                    continue
                gripper.add(int(obj))
                if other == built.pad_geoms[0]:
                    left.add(int(obj))
                elif other == built.pad_geoms[1]:
                    right.add(int(obj))
        return left, right, gripper

    def _privileged(self) -> PrivilegedState:
        built, data = self._built, self._data
        left, right, touching = self._contacts()
        grasped = left & right
        positions = data.qpos[built.object_qpos[:, :3]]
        quats = data.qpos[built.object_qpos[:, 3:]]
        speeds = np.linalg.norm(data.qvel[built.object_qvel[:, None] + np.arange(3)], axis=1) \
            if len(built.object_names) else np.zeros(0)
        resting: dict[tuple[str, str], int] = {}
        for i, kind in enumerate(built.object_kinds):
            if i in touching or speeds[i] > RESTING_MAX_SPEED_M_S:
                continue
            pos = positions[i]
            highest = built.object_max_half_extent[i] + RESTING_STACK_ALLOWANCE_M
            where = next((c.spec.name for c in self._placed_containers
                          if c.contains_xy(pos[:2]) and 0.0 <= pos[2] - c.surface_z <= highest), None)
            if where is None:  # on the table: in a start region, whose surface is the table top
                where = next((r.name for r in self._region_specs
                              if r.contains_xy(pos[:2]) and 0.0 <= pos[2] <= highest), None)
            if where is not None:
                resting[(kind, where)] = resting.get((kind, where), 0) + 1
        objects = {name: ObjectPose(kind=built.object_kinds[i], position=positions[i].copy(),
                                    quaternion=quats[i].copy())
                   for i, name in enumerate(built.object_names)}
        return PrivilegedState(
            goal=GoalState(resting=resting, held=frozenset(built.object_kinds[i] for i in grasped)),
            objects=objects,
            containers=dict(self._containers),
            grasped=tuple(built.object_names[i] for i in sorted(grasped)),
            regions=dict(self._regions),
        )


def make_backend(suite: TaskSuite, **options: Any) -> MujocoTabletop:
    """Registry factory (``ladder_ros.sim.registry``): options are ``render``, ``image_size``, ``render_depth``."""
    allowed = {"render", "image_size", "render_depth"}
    unknown = sorted(set(options) - allowed)
    if unknown:
        raise ConfigError(f"unknown mujoco_tabletop option {unknown[0]!r}; valid: {', '.join(sorted(allowed))}")
    return MujocoTabletop(suite, **options)
