"""The grippers of the built-in tabletop: what a WidowX-like and a Franka-like stand-in are made of.

The tabletop is a gantry (three slides and three hinges) carrying a parallel gripper; what makes it
stand in for one robot or another is the gripper's geometry and travel, the control rate, how the
gripper command is read, the reachable workspace and where the table and the camera are. A task
suite names its embodiment (``embodiment:`` in the suite file, a preset name of
:mod:`ladder_ros.core.presets`), and :func:`embodiment_for` picks the stand-in of that robot. This
module is pure data (no MuJoCo), so the scene parser and the layout sampler read it anywhere.

``WIDOWX_GRIPPER``  The WidowX 250 of SimplerEnv's Bridge envs: 5 Hz, fingers 0.010-0.035 m each
                    (Interbotix; docs/dependencies.md), the gripper command binarised (+1 open,
                    -1 or 0 closed: Bridge policies binarise, no sticky gripper), objects in a patch
                    in front of the base within the arm's 650 mm reach.
``FRANKA_HAND``     The Franka Panda with the Franka Hand of RoboLab-Long: 15 Hz (paper Appendix A),
                    fingers 0-0.04 m each, 0.08 m opening (franka_description
                    ``end_effectors/common/franka_hand.xacro`` at commit 068f0b8: prismatic finger
                    joints with limits 0 and 0.04 m, the rubber fingertips 17.5 x 15.2 x 18.5 mm
                    whose inner faces meet at zero opening, the tool centre point 0.1034 m below the
                    flange; the Franka Hand datasheet's 80 mm stroke). The gripper command is a
                    width: ``(g + 1) / 2`` of the stroke (+1 open, -1 closed; the robots' gripper
                    module reads the Franka driver's commands the same way), reached at 0.1 m/s of
                    opening width, the speed the Franka driver commands (``gripper_speed_m_s`` in
                    config/franka_params.yaml; libfranka ``Gripper::move``), and squeezed with the
                    driver's 20 N (``gripper_force_n``). The home pose is DROID's reset joints
                    (robots/franka.py ``READY_JOINTS``) through the Panda's kinematics (the joint
                    frames of mujoco_menagerie ``franka_emika_panda/panda.xml`` at commit 1b428b0):
                    the tool centre 0.360 m in front of the base and 0.387 m above it, pointing down,
                    the fingers turned -45 degrees about the vertical.

The Franka stand-in has the hand, not the arm: it has no joints between the base and the hand, so a
policy that acts in Panda joint positions (pi0.5-DROID, ``policies/droid_pi05_server.yaml``) has no
kinematics here to be mapped through and is refused (:data:`JOINT_POSITION_REFUSAL`); the
end-effector deltas of the action contract drive it, as they drive the WidowX stand-in.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ladder_ros.core.errors import unknown_name

GANTRY_JOINTS = ("gantry_x", "gantry_y", "gantry_z", "gantry_roll", "gantry_pitch", "gantry_yaw")


@dataclass(frozen=True)
class Servo:
    """A MuJoCo position servo: stiffness (N/m or N m/rad), damping and the force it may use."""

    kp: float
    kv: float
    force: float


@dataclass(frozen=True)
class TabletopEmbodiment:
    """One gripper stand-in of the tabletop: geometry (m, gripper frame: z up, fingers open along y),
    control, workspace, table and camera. ``presets`` are the preset names it serves."""

    name: str
    description: str
    presets: tuple[str, ...]
    control_rate_hz: float
    physics_timestep_s: float
    finger_joint_names: tuple[str, str]  # the names the observation's joint state gives the fingers
    finger_min_m: float  # per-finger travel; the aperture normalises the mean finger position over it
    finger_max_m: float
    finger_open_target_m: float  # pushed against the travel limit: fully open
    finger_closed_target_m: float  # below the travel limit, so a closed finger squeezes what it holds
    gripper_binary: bool  # True: open = command > 0; False: the command is a width, (g + 1) / 2 of the stroke
    finger_speed_m_s: float | None  # each finger's target moves at most this fast (None: it jumps)
    pad_half: tuple[float, float, float]  # the box each finger grasps with
    pad_centre_z: float
    pad_mass: float
    pad_contact: str  # extra MJCF contact attributes of the pads ("": MuJoCo's defaults)
    palm_half: tuple[float, float, float]  # the body the fingers hang from
    palm_centre_z: float
    stem_half: tuple[float, float, float] | None  # the finger between pad and palm (None: the pad reaches it)
    stem_offset: tuple[float, float]  # (y behind the pad's inner face, z) of the stem's centre
    carriage_mass: float
    translation_servo: Servo
    rotation_servo: Servo
    finger_servo: Servo
    home_tcp: tuple[float, float, float]
    home_euler: tuple[float, float, float]
    euler_low: tuple[float, float, float]
    euler_high: tuple[float, float, float]
    workspace_low: tuple[float, float, float]
    workspace_high: tuple[float, float, float]
    default_region: tuple[tuple[float, float], tuple[float, float]]
    table_centre: tuple[float, float, float]
    table_half: tuple[float, float, float]
    camera_position: tuple[float, float, float]
    camera_target: tuple[float, float, float]
    camera_fovy_deg: float
    min_grasp_width_m: float  # objects' widths across a top-down grasp must lie in between
    max_grasp_width_m: float
    max_object_half_height_m: float  # taller objects would meet the palm before the pads reach their middle
    placement_gap_m: float  # clearance between placed footprints

    @property
    def substeps(self) -> int:
        """Physics steps per control period."""
        return int(round(1.0 / (self.control_rate_hz * self.physics_timestep_s)))

    @property
    def joint_names(self) -> tuple[str, ...]:
        return GANTRY_JOINTS + self.finger_joint_names

    @property
    def open_pad_reach_m(self) -> float:
        """How far an open pad's outer face lies from the grasp axis."""
        return self.finger_max_m + 2 * self.pad_half[1]

    def aperture(self, finger_positions: np.ndarray) -> float:
        """The normalised aperture (0 closed, 1 open) of the fingers' mean position."""
        mean = float(np.mean(finger_positions))
        return float(np.clip((mean - self.finger_min_m) / (self.finger_max_m - self.finger_min_m), 0.0, 1.0))

    def finger_target(self, command: float) -> float:
        """Where a gripper command sends each finger (before the speed limit)."""
        if self.gripper_binary:
            return self.finger_open_target_m if command > 0.0 else self.finger_closed_target_m
        opening = (min(1.0, max(-1.0, float(command))) + 1.0) / 2.0
        return self.finger_closed_target_m + opening * (self.finger_open_target_m - self.finger_closed_target_m)


WIDOWX_GRIPPER = TabletopEmbodiment(
    name="widowx",
    description="WidowX-like gripper at 5 Hz (SimplerEnv Bridge contract)",
    presets=("widowx", "widowx_robotarena"),
    control_rate_hz=5.0,  # SimplerEnv / ManiSkill3 Bridge envs: control_freq=5 (docs/dependencies.md)
    physics_timestep_s=0.004,  # 250 Hz; ManiSkill3 uses 500 Hz, this model is stable at 250 Hz and twice as fast
    finger_joint_names=("left_finger", "right_finger"),
    finger_min_m=0.010, finger_max_m=0.035,  # WidowX finger travel (Interbotix, docs/dependencies.md)
    finger_open_target_m=0.035 + 0.002, finger_closed_target_m=0.0,
    gripper_binary=True, finger_speed_m_s=None,
    # Pads: 20 mm wide, 8 mm thick, 30 mm tall; the TCP sits 8 mm above the pads' lower edge.
    pad_half=(0.010, 0.004, 0.015), pad_centre_z=0.007, pad_mass=0.02, pad_contact="",
    palm_half=(0.016, 0.05, 0.008), palm_centre_z=0.040,
    stem_half=None, stem_offset=(0.0, 0.0),
    carriage_mass=0.6,
    # A 4 cm target step (a brisk Bridge delta) settles within one 0.2 s control period, close to
    # critically damped for the 0.6 kg carriage plus armature. The fingers squeeze with up to 15 N
    # (ManiSkill3's WidowX allows 60 N); objects weigh 50 g.
    translation_servo=Servo(1500, 90, 80), rotation_servo=Servo(20, 1.2, 10), finger_servo=Servo(600, 10, 15),
    home_tcp=(0.25, 0.0, 0.15),  # above the table, fingers down, like Bridge start poses
    home_euler=(0.0, 0.0, 0.0),
    # Wrist limits of the stand-in: roll and pitch within +-45 degrees of pointing down, yaw one turn.
    euler_low=(-math.pi / 4, -math.pi / 4, -math.pi), euler_high=(math.pi / 4, math.pi / 4, math.pi),
    # The WidowX 250 reaches 650 mm (Trossen Robotics WidowX 250 6DOF spec); Bridge setups keep the
    # objects well inside it, in a patch in front of the base. Targets are clipped to these bounds
    # (Bridge practice, docs/dependencies.md).
    workspace_low=(0.12, -0.28, 0.010), workspace_high=(0.52, 0.28, 0.30),
    default_region=((0.15, 0.50), (-0.26, 0.26)),
    table_centre=(0.32, 0.0, -0.02), table_half=(0.30, 0.38, 0.02),
    camera_position=(0.02, -0.34, 0.42),  # behind and left of the base, like Bridge's 3rd view
    camera_target=(0.33, 0.0, 0.0),
    camera_fovy_deg=55.0,
    # The gripper closes to 2 x 0.010 m between the pads and opens to 2 x 0.035 m: each finger must
    # squeeze by at least 1 mm, and open pads clear the object by 6 mm a side on the way down.
    min_grasp_width_m=2 * 0.010 + 0.002, max_grasp_width_m=2 * 0.035 - 0.012,
    max_object_half_height_m=0.025,
    # An open pad's outer face is 43 mm from the grasp axis (35 mm finger travel + 8 mm pad), and the
    # thinnest graspable object is 22 mm wide, so a 32 mm gap keeps a top-down grasp of one object
    # from landing a pad on its neighbour.
    placement_gap_m=0.032,
)

FRANKA_HAND = TabletopEmbodiment(
    name="franka",
    description="Franka Hand (Panda) at 15 Hz, end-effector deltas; the arm's joints are not modelled",
    presets=("franka",),
    control_rate_hz=15.0,  # paper Appendix A: 15 Hz on RoboLab-Long
    physics_timestep_s=1.0 / (15.0 * 17),  # 17 steps per 1/15 s: 255 Hz, as stable as the WidowX model's 250 Hz
    finger_joint_names=("panda_finger_joint1", "panda_finger_joint2"),  # franka_description's names
    finger_min_m=0.0, finger_max_m=0.04,  # franka_description: finger joint limits 0 and 0.04 m
    finger_open_target_m=0.04 + 0.0005, finger_closed_target_m=0.0,  # 1 N against the stop (kp 2000)
    gripper_binary=False,
    finger_speed_m_s=0.05,  # 0.1 m/s of opening width, the Franka driver's gripper_speed_m_s, shared by two fingers
    # The rubber fingertip of franka_description: 17.5 mm wide, 15.2 mm thick, 18.5 mm tall, its centre
    # 0.25 mm below the tool centre point (0.0584 + 0.04525 m from the hand against the TCP's 0.1034 m).
    pad_half=(0.00875, 0.0076, 0.00925), pad_centre_z=-0.00025, pad_mass=0.015,  # menagerie: 15 g per finger
    # Firm rubber: a held object's width reads within ~2 mm (MuJoCo's default contact gives way by 3-7 mm
    # under the 10 N squeeze); the time constant is twice the physics step, MuJoCo's stable minimum.
    pad_contact='solref="0.008 1" solimp="0.95 0.99 0.001"',
    # The hand's housing, from franka_description's self-collision capsule of the hand (radius 0.04 m,
    # 0.1 m long across the fingers, centred 0.04 m below the flange): 0.0234 m above the TCP up to the flange.
    palm_half=(0.04, 0.09, 0.04), palm_centre_z=0.1034 - 0.04,
    # franka_description's 'diagonal finger' (17.5 x 7 x 23.5 mm, 15.9 mm behind the finger joint,
    # 28.35 mm below it), upright here: it joins the pad to the housing.
    stem_half=(0.00875, 0.0035, 0.01175), stem_offset=(0.0159, 0.1034 - 0.0584 - 0.02835),
    carriage_mass=0.73,  # menagerie: the hand's 0.73 kg
    # Stiffer than the WidowX's: the Panda tracks its target within a 67 ms period (a 2 cm step settles
    # inside one period; a 0.2 m/s ramp trails by ~6 mm). The fingers squeeze with 10 N each, the
    # driver's 20 N grasp force.
    translation_servo=Servo(4000, 140, 150), rotation_servo=Servo(40, 1.4, 20), finger_servo=Servo(2000, 20, 10),
    home_tcp=(0.360, 0.0, 0.387),  # DROID's reset joints through the Panda's kinematics (module docstring)
    home_euler=(0.0, 0.0, -math.pi / 4),
    euler_low=(-math.pi / 4, -math.pi / 4, -math.pi), euler_high=(math.pi / 4, math.pi / 4, math.pi),
    # Top-down grasps in front of the Panda's base, well inside its 855 mm reach (Franka Emika Panda
    # datasheet) and clear of the base; up to the ready pose's height.
    workspace_low=(0.28, -0.36, 0.010), workspace_high=(0.78, 0.36, 0.45),
    default_region=((0.32, 0.74), (-0.32, 0.32)),
    table_centre=(0.50, 0.0, -0.02), table_half=(0.38, 0.46, 0.02),
    camera_position=(0.10, -0.62, 0.62),  # beside and behind the workspace, like DROID's exterior cameras
    camera_target=(0.52, 0.0, 0.08),
    camera_fovy_deg=55.0,
    # The pads meet at zero opening and open to 80 mm: 20 mm is the thinnest object the scenes use, and
    # open pads clear a 68 mm object by 6 mm a side on the way down.
    min_grasp_width_m=0.020, max_grasp_width_m=0.08 - 0.012,
    max_object_half_height_m=0.0225,  # the housing's underside is 23.4 mm above the TCP
    # An open pad's outer face is 55.2 mm from the grasp axis (40 mm travel + 15.2 mm fingertip); the
    # thinnest object is 20 mm wide: 45 mm between footprints.
    placement_gap_m=0.045,
)

EMBODIMENTS = {e.name: e for e in (WIDOWX_GRIPPER, FRANKA_HAND)}

JOINT_POSITION_REFUSAL = ("the built-in tabletop's Franka stand-in is the Franka Hand on a gantry, without the "
                          "Panda's arm joints, so joint-position actions have no kinematics to be mapped through "
                          "here; run a joint-position policy on franky-sim or the robot, and an end-effector "
                          "delta policy (ee_delta, e.g. scripted_expert_franka) on the tabletop")


def embodiment_for(preset: str) -> TabletopEmbodiment:
    """The tabletop stand-in of the robot a preset describes; an unknown preset lists the valid ones."""
    for embodiment in EMBODIMENTS.values():
        if preset in embodiment.presets:
            return embodiment
    raise unknown_name("embodiment preset of the tabletop", preset,
                       [p for e in EMBODIMENTS.values() for p in e.presets])
