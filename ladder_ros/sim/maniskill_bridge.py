"""SimplerEnv's WidowX Bridge scenes (ManiSkill3) behind the project's simulator interface.

``make_backend(suite, **options)`` (registered as ``"maniskill_bridge"`` in
:mod:`ladder_ros.sim.registry`) returns a :class:`ManiSkillBridgeBackend` that drives the real
ManiSkill3 envs of mani-skill 3.0.1 on the CPU (PhysX CPU, SAPIEN rendering through lavapipe):

* ``reset(task, layout, seed)`` builds the task's scene (``PutCarrotOnPlateInScene-v1`` and the
  other SimplerEnv ids, or the multi-object ``LadderBridgeTableInScene-v1``) and resets it with
  ``options={"episode_id": layout}``, which selects one of its 24 layouts; ``seed`` seeds ManiSkill's
  RNGs. By default every reset rebuilds the physics scene (``reconfiguration_freq=1``, ~0.3 s) so an
  episode's result does not depend on what ran before it in the process; parity checks compare two
  processes step by step and need that.
* ``step(action)`` applies one 7-D action in the project's contract (metres in the robot base frame
  added to the previous *target* pose, Euler XYZ rotation delta, gripper +1 open / -1 closed) for one
  5 Hz control period; a policy trained in another convention has its actions converted before
  they get here (:mod:`ladder_ros.core.action_conventions`).
* Observations carry the ``3rd_view_camera`` image (480x640x3 uint8), the gripper aperture from the
  finger joints, the end-effector position, its true orientation (``ee_pose_at_base``) and its
  controller target in the base frame, the orientation relative to a top-down gripper
  (``TOP_DOWN_REFERENCE``) as ``ee_euler``, the 8 joint positions, and the privileged state.
  ``camera_intrinsics()`` is the camera's own intrinsic matrix (fx = fy = 623.588, cx = 319.501,
  cy = 239.545 at 640x480).
* Stock tasks (``success_rule: simplerenv``) are SimplerEnv's own envs unchanged: the backend
  refuses one whose instruction is not the env's ``get_language_instruction()`` or whose budget is not
  the env's ``max_episode_steps``, and reports the env's own ``evaluate()["success"]`` every step
  (``PrivilegedState.env_success``), which scores the episode.

Frames: every position and orientation this backend reports (end effector, target, objects,
containers) is in the **robot base frame**, the frame the actions are expressed in; ManiSkill's world
frame differs by the base pose (0.147, 0.028, 0.870) m, yawed by 180 degrees (base_env.py).

Privileged predicates, per (object, container) pair and per step, follow ``BaseBridgeEnv._evaluate``
(bridge_dataset_eval/base_env.py): the object's xy offset from the container is within the half
diagonal of the container's bounding box + 3 mm, the object is above the container by at most its
and the container's half heights + 2 cm, and (for containers with ``require_contact``, like the
plate) the two press on each other with more than 0.05 N. An object counts as *resting* when in
addition it is neither grasped (``agent.is_grasping``) nor touched by a finger. The settle window of
the privileged verifier (3 steps on SimplerEnv-Long, LADDER Appendix B) is applied by the
orchestrator core, not here.

Options of ``make_backend`` (all optional): ``asset_dir`` (the folder holding ``data/``; else
``$MS_ASSET_DIR``, else ``../shared/assets/maniskill_bridge``), ``lvp_dir`` (lavapipe; else
``$LADDER_LVP_DIR``, ``$VK_ICD_FILENAMES`` or ``/opt/lvp``), ``render`` (False skips the camera:
observations then have ``image=None``), ``render_depth`` (also the camera's exact depth: ManiSkill's
``depth`` texture, int16 millimetres along the optical axis, as float32 metres; needs ``render``),
``reconfigure_each_episode``.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ladder_ros.core.action_conventions import validate_action
from ladder_ros.core.errors import ConfigError, InvalidInputError
from ladder_ros.core.goals import GoalState
from ladder_ros.core.observation import ContainerInfo, Observation, ObjectPose, PrivilegedState
from ladder_ros.core.rotations import matrix_to_euler_xyz, quaternion_multiply, quaternion_to_matrix
from ladder_ros.core.suite import TaskSuite
from ladder_ros.core.task import SIMPLERENV_RULE, Task
from ladder_ros.camera.model import CameraIntrinsics
from ladder_ros.sim.maniskill_env import (
    ManiSkillSetupError,
    configure_current_process,
    resolve_asset_dir,
    resolve_vulkan_driver,
)
from ladder_ros.sim.maniskill_scenes import (
    CONTACT_FORCE_N,
    MULTI_OBJECT_ENV_ID,
    XY_MARGIN_M,
    BridgeItem,
    BridgeScene,
    parse_scenes,
)

CONTROL_RATE_HZ = 5.0  # BaseBridgeEnv._default_sim_config: control_freq=5 (sim_freq=500)
CAMERA_NAME = "3rd_view_camera"  # WidowX250SBridgeDatasetFlatTable._sensor_configs, 640x480
ARM_JOINTS = ("waist", "shoulder", "elbow", "forearm_roll", "wrist_angle", "wrist_rotate")
FINGER_JOINTS = ("left_finger", "right_finger")
# Finger joint travel of the WidowX 250s: 0.015 (closed) to 0.037 m (open) per joint
# (wx250s.urdf <limit lower="0.015" upper="0.037">; the gripper controller in base_env.py spans the
# same range plus 1 mm clearance). The aperture maps it linearly onto [0, 1].
FINGER_CLOSED_M = 0.015
FINGER_OPEN_M = 0.037
# The top-down gripper pose that ``ee_euler`` is measured from: ee_gripper_link's x axis (the
# approach direction) pointing down and its y axis (the finger travel) along the base's +y, i.e. a
# quarter turn about y. The WidowX starts 3.4 degrees from it (base_env.py reset qpos). Because the
# controller left-multiplies rotation deltas (root_aligned_body_rotation), deltas compose with this
# relative orientation exactly as with the absolute one, and a top-down gripper reads (0, 0, yaw)
# as on the built-in tabletop. Reporting the absolute Euler angles instead would sit at gimbal lock.
TOP_DOWN_REFERENCE = np.array([[0.0, 0.0, 1.0], [0.0, 1.0, 0.0], [-1.0, 0.0, 0.0]])


def aperture_from_fingers(finger_positions: np.ndarray) -> float:
    """Normalised gripper opening in [0, 1] (1 open) from the two finger joint positions (m)."""
    mean = float(np.mean(finger_positions))
    return float(np.clip((mean - FINGER_CLOSED_M) / (FINGER_OPEN_M - FINGER_CLOSED_M), 0.0, 1.0))


def _success(info: dict) -> bool:
    """The env's own ``success`` of its single sub-env (``evaluate()`` or a step's ``info``)."""
    return bool(info["success"][0])


def _unit_quaternion(q: np.ndarray) -> np.ndarray:
    q = np.asarray(q, dtype=np.float64) / np.linalg.norm(q)
    return q if q[0] >= 0 else -q


def object_on_container(object_position: np.ndarray, container_position: np.ndarray,
                        object_half_height: float, container_half_extents: np.ndarray,
                        contact_force_n: float, container: BridgeItem) -> bool:
    """``BaseBridgeEnv._evaluate``'s "source on target" for one pair (positions in metres, one frame
    whose z points up; half extents of the bounding boxes as rotated at the start of the episode)."""
    offset = np.asarray(object_position, dtype=np.float64) - np.asarray(container_position, dtype=np.float64)
    half = np.asarray(container_half_extents, dtype=np.float64)
    xy_ok = float(np.linalg.norm(offset[:2])) <= float(np.linalg.norm(half[:2])) + XY_MARGIN_M
    z_ok = offset[2] > 0 and offset[2] - half[2] - object_half_height <= container.on_top_tolerance_m
    contact_ok = (not container.require_contact) or contact_force_n > CONTACT_FORCE_N
    return bool(xy_ok and z_ok and contact_ok)


@dataclass(frozen=True)
class RigidFrame:
    """A pose as position + unit quaternion (w, x, y, z); maps world coordinates into itself."""

    position: np.ndarray
    quaternion: np.ndarray

    def to_local_point(self, point: np.ndarray) -> np.ndarray:
        return quaternion_to_matrix(self.quaternion).T @ (np.asarray(point, dtype=np.float64) - self.position)

    def to_local_quaternion(self, quaternion: np.ndarray) -> np.ndarray:
        w, x, y, z = self.quaternion
        q = quaternion_multiply(np.array([w, -x, -y, -z]), np.asarray(quaternion, dtype=np.float64))
        return q if q[0] >= 0 else -q


@dataclass
class _Episode:
    """What one episode needs to know about its scene, fixed at reset."""

    scene: BridgeScene
    actors: dict[str, Any]  # item name -> ManiSkill Actor
    half_extents: dict[str, np.ndarray]  # item name -> |R0 @ bbox| / 2 (as in BaseBridgeEnv)
    base: RigidFrame
    env_scored: bool = False  # report the env's own success check (success_rule simplerenv)
    env_success: bool | None = None
    step: int = 0
    timings_ms: dict[str, float] = field(default_factory=dict)


class ManiSkillBridgeBackend:
    """The :class:`~ladder_ros.sim.base.SimulatorBackend` over SimplerEnv's ManiSkill3 Bridge envs."""

    name = "maniskill_bridge"
    control_rate_hz = CONTROL_RATE_HZ

    def __init__(self, suite: TaskSuite, asset_dir: str | Path | None = None, lvp_dir: str | Path | None = None,
                 render: bool = True, reconfigure_each_episode: bool = True, render_depth: bool = False):
        if render_depth and not render:
            raise ConfigError("render_depth needs render: ManiSkill renders depth with the camera image")
        self.suite = suite
        self.scenes: dict[str, BridgeScene] = parse_scenes(suite.scenes, source=suite.source)
        for task in suite.tasks:
            scene = self.scenes[task.scene]
            if task.layouts > scene.layout_count:
                raise ConfigError(f"task {task.task_id!r} asks for {task.layouts} layouts; scene "
                                  f"{scene.name!r} ({scene.env_id}) has {scene.layout_count}",
                                  source=suite.source, key=f"tasks.{task.task_id}.layouts")
            if task.success_rule == SIMPLERENV_RULE and not scene.is_original:
                raise ConfigError(f"task {task.task_id!r}: success_rule simplerenv needs one of SimplerEnv's own "
                                  f"envs; scene {scene.name!r} is {scene.env_id}", source=suite.source,
                                  key=f"tasks.{task.task_id}.success_rule")
        all_models = tuple(sorted({m for scene in self.scenes.values() for m in scene.model_ids}))
        all_files = tuple(dict.fromkeys(f for scene in self.scenes.values() for f in scene.asset_files))
        self.asset_dir = resolve_asset_dir(asset_dir, model_ids=all_models, files=all_files)
        self.driver = resolve_vulkan_driver(lvp_dir)
        # Bounding boxes per scene, from the model database its env reads (bbox, scales, density).
        self._bboxes: dict[str, dict[str, np.ndarray]] = {}
        for scene in self.scenes.values():
            database = self.asset_dir / scene.model_database
            models = json.loads(database.read_text())
            unknown = [m for m in scene.model_ids if "bbox" not in models.get(m, {})]
            if unknown:
                raise ConfigError(f"scene {scene.name!r}: models without a bounding box in {database}: {unknown}; "
                                  f"valid: {', '.join(sorted(models))}", source=suite.source)
            self._bboxes[scene.name] = {
                m: np.asarray(models[m]["bbox"]["max"], dtype=np.float64) - np.asarray(models[m]["bbox"]["min"])
                for m in scene.model_ids}
        self.render = bool(render)
        self.render_depth = bool(render_depth)
        self.reconfigure_each_episode = bool(reconfigure_each_episode)
        configure_current_process(self.asset_dir, self.driver)
        self._envs: dict[str, Any] = {}
        self._episode: _Episode | None = None

    # ----------------------------------------------------------------------------------------- envs
    def _env_for(self, scene: BridgeScene):
        """The gym env of ``scene``, made once per process and kept (making one takes seconds)."""
        if scene.name in self._envs:
            return self._envs[scene.name]
        import gymnasium as gym
        import mani_skill.envs  # noqa: F401  (registers SimplerEnv's env ids)
        from mani_skill.envs.tasks.digital_twins.base_env import BaseDigitalTwinEnv

        if scene.env_id == MULTI_OBJECT_ENV_ID:
            import ladder_ros.sim.maniskill_table_env  # noqa: F401  (registers the multi-object env)
        # ManiSkill appends green-screen exclusions to a class-level list that outlives each env;
        # start every env from an empty one so one scene's ids never leak into the next.
        BaseDigitalTwinEnv._objects_to_remove_from_greenscreen.clear()
        obs_mode = "rgb+depth+segmentation" if self.render_depth else "rgb+segmentation"
        env = gym.make(scene.env_id, obs_mode=obs_mode, num_envs=1, sim_backend="cpu",
                       render_backend="cpu", reconfiguration_freq=1 if self.reconfigure_each_episode else 0,
                       **scene.env_kwargs())
        unwrapped = env.unwrapped
        if scene.is_original:
            expected = [scene.objects[0].model_id, scene.containers[0].model_id]
            if list(unwrapped.obj_names) != expected:
                env.close()
                raise ConfigError(f"scene {scene.name!r}: {scene.env_id} loads {list(unwrapped.obj_names)} "
                                  f"(object, container), the suite says {expected}", source=self.suite.source,
                                  key=f"scenes.{scene.name}")
        self._envs[scene.name] = env
        return env

    # ------------------------------------------------------------------------------------ interface
    def reset(self, task: Task, layout: int, seed: int) -> Observation:
        """Build ``task``'s scene in ``layout`` (0-based, selects ManiSkill's ``episode_id``)."""
        import torch

        if task.scene not in self.scenes:
            raise ConfigError(f"task {task.task_id!r} names scene {task.scene!r}; this backend's suite has "
                              f"{', '.join(sorted(self.scenes))}")
        scene = self.scenes[task.scene]
        if isinstance(layout, bool) or not isinstance(layout, (int, np.integer)) or not 0 <= layout < task.layouts:
            raise InvalidInputError(f"layout must be an integer in [0, {task.layouts}), got {layout!r}")
        if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
            raise InvalidInputError(f"seed must be a non-negative integer, got {seed!r}")
        env = self._env_for(scene)
        unwrapped = env.unwrapped
        env_scored = task.success_rule == SIMPLERENV_RULE
        if env_scored:
            self._check_stock_task(task, env)
        started = time.perf_counter()
        obs, info = unwrapped.reset(seed=int(seed), options={"episode_id": torch.tensor([int(layout)])})
        reset_ms = (time.perf_counter() - started) * 1e3
        actors = {item.name: unwrapped.objs[item.model_id] for item in scene.items}
        half_extents = {}
        for item in scene.items:
            size = self._bboxes[scene.name][item.model_id]
            rotation = quaternion_to_matrix(actors[item.name].pose.q[0].cpu().numpy())
            # BaseBridgeEnv rotates the bbox size vector by the pose after settling; abs keeps the
            # half extents positive for any yaw (the env only ever uses norms and the z component).
            half_extents[item.name] = np.abs(rotation @ size) / 2.0
        base_pose = unwrapped.agent.robot.pose.raw_pose[0].cpu().numpy().astype(np.float64)
        self._episode = _Episode(scene=scene, actors=actors, half_extents=half_extents,
                                 base=RigidFrame(base_pose[:3], base_pose[3:]), env_scored=env_scored,
                                 env_success=_success(info) if env_scored else None)
        self._episode.timings_ms["reset"] = reset_ms
        return self._observe(obs if self.render else None)

    def _check_stock_task(self, task: Task, env) -> None:
        """A stock task is the env unchanged: its own instruction and its own episode length."""
        from mani_skill.utils.registration import REGISTERED_ENVS

        env_id = self.scenes[task.scene].env_id
        instruction = str(env.unwrapped.get_language_instruction()[0])
        limit = REGISTERED_ENVS[env_id].max_episode_steps  # @register_env(max_episode_steps=...)
        problems = []
        if task.instruction != instruction:
            problems.append(f"instruction {task.instruction!r} is not the env's {instruction!r}")
        if limit is not None and task.budget_steps != limit:
            problems.append(f"budget_steps {task.budget_steps} is not the env's max_episode_steps {limit}")
        if problems:
            raise ConfigError(f"task {task.task_id!r} is scored as SimplerEnv's {env_id} (success_rule simplerenv) "
                              "but its " + " and its ".join(problems), source=self.suite.source,
                              key=f"tasks.{task.task_id}")

    def camera_intrinsics(self) -> CameraIntrinsics:
        """The intrinsics of ``3rd_view_camera`` as the env's camera reports them (``intrinsic_cv``)."""
        if not self._envs:
            raise InvalidInputError("no env yet; call reset() first")
        env = self.env if self._episode is not None else next(iter(self._envs.values()))
        camera = env.unwrapped.scene.sensors[CAMERA_NAME]
        matrix = camera.get_params()["intrinsic_cv"][0].cpu().numpy().astype(np.float64)
        config = camera.config
        return CameraIntrinsics(width=int(config.width), height=int(config.height), fx=float(matrix[0, 0]),
                                fy=float(matrix[1, 1]), cx=float(matrix[0, 2]), cy=float(matrix[1, 2]))

    def step(self, action: np.ndarray) -> Observation:
        """One 5 Hz control period with one 7-D action (see the module docstring for its meaning)."""
        import torch

        if self._episode is None:
            raise InvalidInputError("step() before reset()")
        command = validate_action(action).copy()
        command[6] = float(np.clip(command[6], -1.0, 1.0))
        unwrapped = self.env.unwrapped
        started = time.perf_counter()
        tensor = torch.as_tensor(command, dtype=torch.float32)
        if self.render:
            obs, _, _, _, info = unwrapped.step(tensor)
        else:
            # The physics half of BaseEnv.step, without the camera render (and without evaluate()
            # unless the env's own success check scores this episode).
            unwrapped._step_action(tensor)
            unwrapped._elapsed_steps += 1
            obs = None
            info = unwrapped.evaluate() if self._episode.env_scored else None
        if self._episode.env_scored:
            self._episode.env_success = _success(info)
        self._episode.timings_ms["step"] = (time.perf_counter() - started) * 1e3
        self._episode.step += 1
        return self._observe(obs)

    def close(self) -> None:
        for env in self._envs.values():
            env.close()
        self._envs.clear()
        self._episode = None

    # --------------------------------------------------------------------------------- observation
    @property
    def env(self):
        """The gym env of the current episode (for tests and tools; not part of the interface)."""
        if self._episode is None:
            raise InvalidInputError("no episode yet; call reset() first")
        return self._envs[self._episode.scene.name]

    @property
    def last_timings_ms(self) -> dict[str, float]:
        """Wall time of the last reset and step inside ManiSkill, in milliseconds."""
        return dict(self._episode.timings_ms) if self._episode else {}

    def _observe(self, obs: dict | None) -> Observation:
        episode = self._episode
        assert episode is not None
        unwrapped = self.env.unwrapped
        agent = unwrapped.agent
        started = time.perf_counter()
        qpos = agent.robot.get_qpos()[0].cpu().numpy().astype(np.float64)
        arm = agent.controller.controllers["arm"]
        ee_pose = arm.ee_pose_at_base.raw_pose[0].cpu().numpy().astype(np.float64)
        target = agent.controller.get_state()["arm"]["target_pose"][0].cpu().numpy().astype(np.float64)
        image = depth = None
        if obs is not None:
            image = np.ascontiguousarray(obs["sensor_data"][CAMERA_NAME]["rgb"][0].cpu().numpy()).copy()
            if self.render_depth:
                millimetres = obs["sensor_data"][CAMERA_NAME]["depth"][0, ..., 0].cpu().numpy()
                depth = millimetres.astype(np.float32) / np.float32(1000.0)
                depth[millimetres <= 0] = np.nan  # nothing rendered there
        privileged = self._privileged_state()
        episode.timings_ms["observe"] = (time.perf_counter() - started) * 1e3
        return Observation(
            step=episode.step,
            image=image,
            aperture=aperture_from_fingers(qpos[6:8]),
            ee_position=ee_pose[:3].copy(),
            ee_euler=matrix_to_euler_xyz(quaternion_to_matrix(ee_pose[3:]) @ TOP_DOWN_REFERENCE.T),
            joint_names=ARM_JOINTS + FINGER_JOINTS,
            joint_positions=qpos,
            target_position=target[:3].copy(),
            privileged=privileged,
            depth=depth,
            ee_quaternion=_unit_quaternion(ee_pose[3:]),
        )

    def _privileged_state(self) -> PrivilegedState:
        episode = self._episode
        assert episode is not None
        unwrapped = self.env.unwrapped
        scene, agent = unwrapped.scene, unwrapped.agent
        fingers = (agent.finger1_link, agent.finger2_link)
        world: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        for name, actor in episode.actors.items():
            raw = actor.pose.raw_pose[0].cpu().numpy().astype(np.float64)
            world[name] = (raw[:3], raw[3:])
        resting: dict[tuple[str, str], int] = {}
        held: set[str] = set()
        grasped: list[str] = []
        for obj in episode.scene.objects:
            actor = episode.actors[obj.name]
            if bool(agent.is_grasping(actor)[0]):
                held.add(obj.name)
                grasped.append(obj.name)
            touched = any(float(np.linalg.norm(scene.get_pairwise_contact_forces(f, actor)[0].cpu().numpy()))
                          > CONTACT_FORCE_N for f in fingers)
            if obj.name in held or touched:
                continue
            for container in episode.scene.containers:
                force = 0.0
                if container.require_contact:
                    force = float(np.linalg.norm(scene.get_pairwise_contact_forces(
                        actor, episode.actors[container.name])[0].cpu().numpy()))
                if object_on_container(world[obj.name][0], world[container.name][0],
                                       float(episode.half_extents[obj.name][2]),
                                       episode.half_extents[container.name], force, container):
                    resting[(obj.name, container.name)] = resting.get((obj.name, container.name), 0) + 1
        base = episode.base
        objects = {
            obj.name: ObjectPose(kind=obj.name, position=base.to_local_point(world[obj.name][0]),
                                 quaternion=base.to_local_quaternion(world[obj.name][1]))
            for obj in episode.scene.objects
        }
        containers = {}
        for container in episode.scene.containers:
            position = base.to_local_point(world[container.name][0])
            half = episode.half_extents[container.name]
            containers[container.name] = ContainerInfo(
                name=container.name, position=position, half_extents=half.copy(),
                surface_z=float(position[2] + half[2]))
        return PrivilegedState(goal=GoalState(resting=resting, held=frozenset(held)), objects=objects,
                               containers=containers, grasped=tuple(grasped), env_success=episode.env_success)


def make_backend(suite: TaskSuite, **options: Any) -> ManiSkillBridgeBackend:
    """Factory named in :mod:`ladder_ros.sim.registry`; ``options`` are the constructor's keywords."""
    known = {"asset_dir", "lvp_dir", "render", "reconfigure_each_episode", "render_depth"}
    unknown = sorted(set(options) - known)
    if unknown:
        raise ConfigError(f"unknown maniskill_bridge options {unknown}; valid: {', '.join(sorted(known))}")
    return ManiSkillBridgeBackend(suite, **options)


__all__ = ["ManiSkillBridgeBackend", "ManiSkillSetupError", "make_backend", "aperture_from_fingers",
           "object_on_container", "CONTROL_RATE_HZ"]
