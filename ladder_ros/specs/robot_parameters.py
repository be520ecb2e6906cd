"""The ROS parameters of the robot-side nodes: the WidowX and Franka drivers and the dress rehearsal's twin and server.

Plain data like the loop's nodes' (:mod:`ladder_ros.specs.parameters`, which registers these), with
the rules between one driver's parameters. No rclpy here.
"""

from __future__ import annotations

from typing import Any, Mapping

from ladder_ros.core.errors import ConfigError
from ladder_ros.specs.param_spec import (
    APERTURE_JOINT, BASE_FRAME, BOOL, COMMON, FLOAT, FLOAT_LIST, INT, STR, STR_LIST, ParamSpec)
from ladder_ros.robots.franka import FRANKY_VELOCITY_LIMITS as FRANKA_VELOCITY
from ladder_ros.robots.franka import READY_JOINTS as FRANKA_READY
from ladder_ros.robots.dynamixel import BLOCKED_EFFORT
from ladder_ros.robots.wx250s import MOTOR_MODELS as WX250S_MOTORS
from ladder_ros.robots.wx250s import NEUTRAL_JOINTS as WX250S_NEUTRAL

# A joint's motor pushes at its limit once its effort reaches this share of what it reads blocked at 12 V
# (XM430-W350 2.3 A, XL430-W250 full load; ladder_ros/robots/dynamixel.py): the PWM of a blocked motor's position
# loop is full once it is 0.22 rad behind, and a joint holding the arm up sits at its goal drawing far less.
SATURATED_SHARE = 0.8
WX250S_SATURATED = [round(SATURATED_SHARE * BLOCKED_EFFORT[model], 1) for model in WX250S_MOTORS]

# The robot drivers (ladder_ros/nodes/driver/widowx.py, franka_driver.py): what both share.
ROBOT_DRIVER = COMMON + (
    BASE_FRAME,
    APERTURE_JOINT,
    ParamSpec("action_source", STR, "policy", "The only node whose policy/action messages are applied (a node name "
              "in the graph namespace, or a fully qualified one); while another node publishes actions, every action "
              "is refused and the arm holds (docs/safety.md)"),
    ParamSpec("max_action_age_s", FLOAT, 0.5, "Refuse an action stamped longer ago than this when it arrives (s): "
              "a late action moves the arm for a moment that has passed", min=0.01, max=10.0),
    ParamSpec("watchdog_periods", FLOAT, 1.5, "Stop the arm and hold when no action came for this many control "
              "periods while armed (counted as a watchdog intervention)", min=1.0, max=50.0),
    ParamSpec("hold_while_verifying", BOOL, False, "Hold the arm still while the orchestrator waits for a "
              "verification (the simulator pauses then; the paper's robots ran on without pausing)"),
    ParamSpec("speed_scale", FLOAT, 1.0, "Scale of the arm's speed for a first armed run (WidowX: every action's "
              "delta; Franka: franky's relative dynamics factor); 1 for evaluation", min=0.01, max=1.0),
    ParamSpec("home_after_episode", BOOL, True, "When an episode ends and the robot is armed, open the gripper and "
              "move to the home joints"),
    ParamSpec("connect_timeout_s", FLOAT, 30.0, "Give up starting when the arm does not answer within this long "
              "(s)", min=0.1, max=600.0),
    ParamSpec("future_tolerance_s", FLOAT, 0.05, "Refuse an action stamped more than this after it arrives (s; "
              "counted as future_stamp): the policy's and the driver's clocks may disagree by this much", min=0.0,
              max=1.0),
    ParamSpec("vendor_call_timeout_s", FLOAT, 2.0, "Deadline of one blocking call of the arm's API (register reads "
              "and writes, torque), run off the control thread; missed: a vendor_timeout fault (s)", min=0.1,
              max=60.0),
    ParamSpec("recover_timeout_s", FLOAT, 10.0, "Deadline of robot/recover's vendor recovery (reboots included) (s)",
              min=0.5, max=120.0),
    ParamSpec("health_poll_s", FLOAT, 1.0, "Read the motors' error and torque registers this often (s; WidowX)",
              min=0.1, max=60.0),
    ParamSpec("max_state_age_s", FLOAT, 0.5, "The arm's joint states older than this while no recovery runs are a "
              "vendor_timeout fault (s)", min=0.05, max=10.0),
)

WIDOWX_DRIVER = ROBOT_DRIVER + (
    ParamSpec("interbotix_api", STR, "vendor", "Whose interbotix_xs_modules the driver talks to: vendor (the robot's "
              "Interbotix workspace) or twin (the simulated WidowX, docs/widowx_twin.md)", choices=("vendor", "twin")),
    ParamSpec("robot_model", STR, "wx250s", "Interbotix arm model; this driver's kinematics are the wx250s'",
              choices=("wx250s",)),
    ParamSpec("robot_name", STR, "wx250s", "Namespace of the Interbotix xs_sdk node (robot_name of its launch)"),
    ParamSpec("moving_time_s", FLOAT, 0.25, "Interbotix time-based profile: time for each joint move (s), set once "
              "at start (Bridge: 1.25 x its 0.2 s step)", min=0.05, max=5.0),
    ParamSpec("accel_time_s", FLOAT, 0.1, "Interbotix time-based profile: acceleration time (s), at most half of "
              "moving_time_s (Bridge: 0.5 x its 0.2 s step)", min=0.0, max=2.5),
    ParamSpec("gripper_pressure", FLOAT, 0.5, "Interbotix gripper pressure (0..1 of its PWM range)", min=0.0,
              max=1.0),
    ParamSpec("finger_closed_m", FLOAT, 0.010, "Left finger position read as aperture 0 (m; Bridge's normalisation)",
              min=0.0, max=0.1),
    ParamSpec("finger_open_m", FLOAT, 0.035, "Left finger position read as aperture 1 (m; Bridge's normalisation)",
              min=0.0, max=0.1),
    ParamSpec("workspace_low", FLOAT_LIST, [0.10, -0.25, 0.03], "Lower corner x, y, z (m, base frame) of the box "
              "the end-effector target is clipped into; measure it on your table", size=3, min=-1.0, max=1.0),
    ParamSpec("workspace_high", FLOAT_LIST, [0.45, 0.25, 0.35], "Upper corner x, y, z (m, base frame) of the "
              "workspace box", size=3, min=-1.0, max=1.0),
    ParamSpec("home_joints", FLOAT_LIST, list(WX250S_NEUTRAL), "Home joints (rad, waist..wrist_rotate): Bridge's "
              "neutral pose", size=6, min=-3.2, max=3.2),
    ParamSpec("ik_max_iterations", INT, 20, "Inverse kinematics: Newton iterations before a target counts as "
              "unreachable", min=1, max=200),
    ParamSpec("tracking_tolerance_rad", FLOAT, 0.15, "A joint further than this from where its motion profile puts it "
              "(rad) for stall_readings readings has stopped following its command: a stall fault", min=0.01,
              max=1.0),
    ParamSpec("command_latency_s", FLOAT, 0.5, "A goal may reach the motors this late (s; the vendor's command "
              "callback on a loaded machine): a joint is off its profile only when it is further than "
              "tracking_tolerance_rad from every place the profile put it over this window (a stall is caught that "
              "much later)", min=0.0, max=2.0),
    ParamSpec("stall_readings", INT, 2, "Readings in a row (one per control period) a joint must be off its profile "
              "before it counts as stalled", min=1, max=50),
    ParamSpec("stall_effort_ma", FLOAT_LIST, WX250S_SATURATED, "Effort on xs_sdk's joint_states (present current, "
              "mA; the XL430-W250 of wrist_rotate reads its load, 0.1 % x 2.69) at or above which a joint's motor "
              "pushes at its limit, waist..wrist_rotate: 80 % of a blocked motor's at 12 V (XM430-W350 2.3 A, "
              "XL430-W250 full load). A joint there, more than stall_lag_rad from its goal and not moving towards it "
              "for stall_confirm_s, is a stall fault at once (docs/safety.md); the gripper is not judged by it",
              size=6, min=1.0, max=10000.0),
    ParamSpec("stall_lag_rad", FLOAT, 0.05, "A joint further than this from its goal (rad) lags it; with its effort "
              "at stall_effort_ma and no motion towards the goal, for stall_confirm_s, it is blocked", min=0.005,
              max=1.0),
    ParamSpec("stall_confirm_s", FLOAT, 0.2, "How long (s, by the joint states' stamps) a joint must push at "
              "stall_effort_ma while lagging its goal before it counts as stalled; a blocked joint is held within "
              "about this plus the 50 ms the driver reads the efforts at", min=0.05, max=2.0),
    ParamSpec("gripper_timeout_s", FLOAT, 3.0, "A gripper command must have opened the fingers, or moved them towards "
              "closed, within this long (s): else a gripper_fault", min=0.2, max=30.0),
    ParamSpec("twin_xs_sdk", STR, "in_process", "interbotix_api twin: where the twin's xs_sdk runs: in_process (motors "
              "in this process, no scene) or remote (the widowx_twin node's motors and physics, over ROS under "
              "/<robot_name>; docs/rehearsal.md)", choices=("in_process", "remote")),
)

FRANKA_DRIVER = ROBOT_DRIVER + (
    ParamSpec("host", STR, "172.16.0.2", "FCI address of the arm (franky-sim: 127.0.0.1)"),
    ParamSpec("model", STR, "panda", "Arm model, for its joint limits (franky-sim simulates an FR3)",
              choices=("panda", "fr3")),
    ParamSpec("joint_names", STR_LIST, [f"panda_joint{i}" for i in range(1, 8)], "Arm joint names, as the policy's "
              "actions and the joint states name them"),
    ParamSpec("ready_joints", FLOAT_LIST, list(FRANKA_READY), "Home joints (rad): DROID's reset pose", size=7,
              min=-4.6, max=4.6),
    ParamSpec("gripper_speed_m_s", FLOAT, 0.1, "Franka Hand speed (m/s)", min=0.01, max=0.2),
    ParamSpec("gripper_force_n", FLOAT, 20.0, "Franka Hand grasp force (N)", min=1.0, max=70.0),
    ParamSpec("max_width_m", FLOAT, 0.08, "Franka Hand opening read as aperture 1 (m)", min=0.01, max=0.2),
    ParamSpec("realtime", BOOL, True, "Require a real-time kernel for franky's control thread (libfranka's default; "
              "false for franky-sim)"),
    ParamSpec("max_joint_velocity", FLOAT_LIST, list(FRANKA_VELOCITY), "Joint velocity limits for streaming (rad/s, "
              "joints 1-7; default: the limits franky reports for a Panda or FR3); refused at start when above what "
              "franky reports for the connected arm", size=7, min=0.01, max=10.0),
    ParamSpec("workspace_low", FLOAT_LIST, [0.15, -0.6, 0.02], "Lower corner x, y, z (m, base frame) of the box the "
              "end effector may reach; a step that would leave it stops at its wall; measure it on your table",
              size=3, min=-2.0, max=2.0),
    ParamSpec("workspace_high", FLOAT_LIST, [0.85, 0.6, 0.9], "Upper corner x, y, z (m, base frame) of the "
              "workspace box", size=3, min=-2.0, max=2.0),
)


def _widowx_ranges_ordered(values: Mapping[str, Any], node: str) -> None:
    if values["finger_open_m"] <= values["finger_closed_m"]:
        raise ConfigError(f"parameter {node}.finger_open_m: must be more than finger_closed_m "
                          f"({values['finger_closed_m']}), got {values['finger_open_m']}")
    if values["accel_time_s"] > values["moving_time_s"] / 2:
        raise ConfigError(f"parameter {node}.accel_time_s: must be at most half of moving_time_s "
                          f"({values['moving_time_s']}), got {values['accel_time_s']}")
    _workspace_ordered(values, node)


def _workspace_ordered(values: Mapping[str, Any], node: str) -> None:
    for axis, low, high in zip("xyz", values["workspace_low"], values["workspace_high"]):
        if not low < high:
            raise ConfigError(f"parameter {node}.workspace_high: {axis} must be above workspace_low's "
                              f"({low}), got {high}")


def _franka_joints_named(values: Mapping[str, Any], node: str) -> None:
    names = values["joint_names"]
    if len(names) != 7 or len(set(names)) != 7 or not all(names):
        raise ConfigError(f"parameter {node}.joint_names: must be 7 distinct names, got {names!r}")
    _workspace_ordered(values, node)


# Rules between parameters of one driver, checked before start and by the node itself.
ROBOT_NODE_CHECKS = {"widowx_driver": _widowx_ranges_ordered, "franka_driver": _franka_joints_named}
