"""Every ROS parameter of every ladder_ros node, declared once, as plain data.

Nodes declare these with descriptors (description, range, read-only) at startup, so a bad value
fails with its name before the node does anything (docs/graph.md). ``ladder-ros up`` and the
launch files check a params file against the same specs before any process starts, so a typo or an
out-of-range value is one error line naming the node and the parameter, and nothing is left running.
This module does not import rclpy.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping

from ladder_ros.core.action_conventions import RotationConvention
from ladder_ros.core.errors import ConfigError, did_you_mean
from ladder_ros.core.orchestrator import Variant
from ladder_ros.core.presets import PRESETS
from ladder_ros.messages import CLOCK_MODES, LOCKSTEP
from ladder_ros.robots.franka import FRANKY_VELOCITY_LIMITS as FRANKA_VELOCITY
from ladder_ros.robots.franka import READY_JOINTS as FRANKA_READY
from ladder_ros.robots.wx250s import NEUTRAL_JOINTS as WX250S_NEUTRAL
from ladder_ros.robots.wx250s import SLEEP_JOINTS as WX250S_SLEEP
from ladder_ros.sim.registry import BACKENDS as SIMULATORS

BOOL, INT, FLOAT, STR, STR_LIST, FLOAT_LIST = "bool", "int", "float", "str", "str_list", "float_list"


@dataclass(frozen=True)
class ParamSpec:
    """One parameter: its type, default, description (with units), and allowed values."""

    name: str
    type: str
    default: Any
    description: str
    min: float | None = None
    max: float | None = None
    choices: tuple[str, ...] = ()
    read_only: bool = True
    size: int | None = None  # float lists: the number of values

    def check(self, value: Any, node: str = "", *, strict: bool = False) -> Any:
        """``value`` if it is valid for this parameter; else a :class:`ConfigError` naming it.

        ``strict``: the value is what a node will read itself (a params file), so an integer for a
        decimal parameter is refused, as ROS 2 refuses it ("expecting type DOUBLE"); otherwise
        (values this package writes for the node, e.g. ``--set``) it is converted.
        """
        where = f"{node}.{self.name}" if node else self.name

        def fail(why: str) -> ConfigError:
            return ConfigError(f"parameter {where}: {why}, got {value!r}")

        if self.type == BOOL:
            if not isinstance(value, bool):
                raise fail("must be true or false")
        elif self.type == INT:
            if isinstance(value, bool) or not isinstance(value, int):
                raise fail("must be an integer")
        elif self.type == FLOAT:
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise fail("must be a finite number")
            if strict and isinstance(value, int):
                raise fail(f"must be a decimal number: ROS 2 refuses an integer for a double parameter, "
                           f"write {value}.0")
            value = float(value)
        elif self.type == STR:
            if not isinstance(value, str):
                raise fail("must be a string")
        elif self.type == STR_LIST:
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise fail("must be a list of strings")
        elif self.type == FLOAT_LIST:
            if not isinstance(value, list) or not all(
                    isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in value):
                raise fail("must be a list of finite numbers")
            if strict and any(isinstance(v, int) for v in value):
                raise fail("must be a list of decimal numbers: ROS 2 refuses integers in a double array, write 0.0 "
                           "for 0")
            if self.size is not None and len(value) != self.size:
                raise fail(f"must have {self.size} values")
            value = [float(v) for v in value]
            if self.min is not None and any(v < self.min for v in value):
                raise fail(f"values must be >= {self.min}")
            if self.max is not None and any(v > self.max for v in value):
                raise fail(f"values must be <= {self.max}")
            return value
        if self.min is not None and value < self.min:
            raise fail(f"must be >= {self.min}")
        if self.max is not None and value > self.max:
            raise fail(f"must be <= {self.max}")
        if self.choices and value not in self.choices:
            raise fail(f"must be one of {', '.join(self.choices)}")
        return value


def _preset_choices() -> tuple[str, ...]:
    return tuple(sorted(PRESETS))


# Shared by every node: the loop's parameters come from the embodiment preset (core/presets.py,
# paper Appendix B), never from per-node copies of its numbers.
COMMON = (
    ParamSpec("preset", STR, "widowx", "Embodiment preset: control rate, trigger and verifier timing "
              "(paper Appendix B; ladder_ros/core/presets.py)", choices=_preset_choices()),
    ParamSpec("clock_mode", STR, LOCKSTEP, "lockstep: the simulator steps only when the step's decisions and "
              "action are in (simulation); wall_clock: the robot runs at the control rate", choices=CLOCK_MODES),
)

SIM_BRIDGE = COMMON + (
    ParamSpec("simulator", STR, "mujoco_tabletop", "Simulator backend (ladder_ros/sim/registry.py)",
              choices=tuple(sorted(SIMULATORS))),
    ParamSpec("suite", STR, "config/suites/tabletop.yaml", "Task suite YAML the simulator builds scenes from "
              "(a path; relative paths resolve against the package share folder)"),
    ParamSpec("render", BOOL, True, "Render and publish the camera image every step"),
    ParamSpec("image_size", INT, 256, "Camera image side (pixels; the MuJoCo tabletop renders square images)",
              min=16, max=2048),
    ParamSpec("base_frame", STR, "base_link", "Frame of the end-effector pose (robot base)"),
    ParamSpec("camera_frame", STR, "camera_color_optical_frame", "Frame id of the camera image"),
    ParamSpec("aperture_joint", STR, "gripper_aperture", "Name of the JointState entry carrying the normalised "
              "gripper aperture (0 closed, 1 open)"),
    ParamSpec("resend_after_s", FLOAT, 2.0, "Lockstep: republish the current observation when no action came "
              "for this long (s), so a restarted node catches up", min=0.05, max=600.0),
    ParamSpec("publish_depth", BOOL, False, "Also render the simulator's exact depth (m) and publish it on "
              "camera/aligned_depth_to_color/image_raw, the truth estimated depth is scored against"),
    ParamSpec("action_source", STR, "policy", "The only node whose policy/action messages are applied (a node "
              "name in the graph namespace, or a fully qualified one); while any other node publishes actions, "
              "every step holds still (docs/safety.md)"),
)

CAMERA = COMMON + (
    ParamSpec("backend", STR, "realsense", "Camera backend: realsense (pyrealsense2, by serial or a recording), "
              "opencv (a USB/UVC camera or a video file), fake (synthetic frames) or twin (the frames the WidowX "
              "twin renders, docs/rehearsal.md)", choices=("realsense", "opencv", "fake", "twin")),
    ParamSpec("serial", STR, "", "realsense: the camera's serial number; empty: the only one connected"),
    ParamSpec("recording", STR, "", "realsense: play back this recording (.db3) instead of a camera"),
    ParamSpec("device", STR, "0", "opencv: camera index, device path (/dev/video0) or video file"),
    ParamSpec("width", INT, 0, "Colour image width (px); 0: the device's default", min=0, max=8192),
    ParamSpec("height", INT, 0, "Colour image height (px); 0: the device's default", min=0, max=8192),
    ParamSpec("fps", FLOAT, 0.0, "Frame rate (Hz); 0: the device's default (fake: 30; a video file: its own "
              "rate)", min=0.0, max=1000.0),
    ParamSpec("depth", BOOL, True, "realsense: also stream depth, aligned to colour, on "
              "camera/aligned_depth_to_color/image_raw (32FC1, m)"),
    ParamSpec("realtime_playback", BOOL, True, "realsense recordings and video files: play at the recorded "
              "speed, or a video at fps when given (false: as fast as frames are read)"),
    ParamSpec("calibration_file", STR, "", "Intrinsics for camera/camera_info (ROS camera_info YAML, e.g. "
              "calibration/widowx_main.yaml; relative paths also resolve against the package share folder); "
              "empty: the device's factory intrinsics (RealSense), none for a plain USB camera"),
    ParamSpec("frame_id", STR, "camera_color_optical_frame", "Frame id of the images (the optical frame)"),
    ParamSpec("camera_name", STR, "camera", "Name in logs and diagnostics"),
    ParamSpec("retry_s", FLOAT, 2.0, "Wait this long (s) before opening the camera again after it failed or was "
              "unplugged", min=0.05, max=600.0),
    ParamSpec("diagnostics_period_s", FLOAT, 1.0, "Publish diagnostics this often (s)", min=0.05, max=60.0),
    ParamSpec("loop", BOOL, False, "opencv video files: start again from the first frame at the end (false: the "
              "stream ends)"),
    ParamSpec("base_frame", STR, "", "The robot base frame the calibration's extrinsics must be in (the driver's "
              "base_frame, e.g. wx250s/base_link); empty: whatever the calibration file says. The camera pose goes "
              "out on /tf_static from it to frame_id"),
    ParamSpec("twin_channel", STR, "", "twin: the shared-memory frame channel the twin writes (a file name under "
              "/dev/shm); empty: the one named after the ROS domain, the namespace and camera_name, as the twin "
              "names it (ladder_ros/camera/shared_frame.py)"),
)

DEPTH = COMMON + (
    ParamSpec("backend", STR, "moge2", "Depth backend: moge2 (MoGe-2 metric depth from colour, the paper's "
              "real-world depth, Section 5), depth_anything_v2 (a metric Depth Anything V2 via transformers) or "
              "sensor (the camera's own aligned depth, passed on)", choices=("moge2", "depth_anything_v2", "sensor")),
    ParamSpec("model_path", STR, "", "moge2: a local MoGe-2 checkpoint (model.pt); depth_anything_v2: a local "
              "model folder. Never downloaded"),
    ParamSpec("device", STR, "auto", "Torch device: auto (cuda when available), cpu, cuda, cuda:N"),
    ParamSpec("fp16", STR, "auto", "Half precision: auto (on for CUDA, off on the CPU, where it is very slow), "
              "on, off", choices=("auto", "on", "off")),
    ParamSpec("resolution_level", INT, 9, "moge2: ViT token budget from its minimum (0) to maximum (9, MoGe's "
              "default, most accurate)", min=0, max=9),
    ParamSpec("use_camera_info", BOOL, True, "moge2: use the calibrated field of view from camera/camera_info "
              "(false, or no camera_info yet: MoGe estimates it)"),
    ParamSpec("compare_to_sensor", BOOL, False, "Score each estimate against the measured depth of the same "
              "stamp (camera/aligned_depth_to_color/image_raw: the simulator's truth, or the sensor) in the "
              "diagnostics"),
    ParamSpec("diagnostics_period_s", FLOAT, 1.0, "Publish diagnostics this often (s)", min=0.05, max=60.0),
)

POLICY = COMMON + (
    ParamSpec("policy", STR, "scripted_expert", "Low-level policy config: a name under policies/ (e.g. "
              "bridge_pi0_server, droid_pi05_server, local_pi0, scripted_expert, the simulation-only test "
              "instrument that reads privileged state) or a path to a policy YAML (ladder_ros/policies/config.py)"),
    ParamSpec("noise", STR, "bridge_like", "Scripted expert execution noise preset "
              "(ladder_ros/policies/scripted_expert.py ExpertNoise)", choices=("off", "bridge_like")),
    ParamSpec("rotation_convention", STR, "", "How the policy's rotation numbers are meant, replacing the "
              "convention the policy declares (empty: the policy's own); its actions are converted to the "
              "Euler XYZ of policy/action (ladder_ros/core/action_conventions.py)",
              choices=("",) + tuple(c.value for c in RotationConvention)),
    ParamSpec("aperture_joint", STR, "gripper_aperture", "JointState entry with the normalised gripper aperture"),
    ParamSpec("control_priority", INT, 10, "Wall clock: real-time (SCHED_FIFO) priority of the control thread "
              "where the system grants it (an rtprio limit), 0 for normal scheduling; refused, the node runs at "
              "normal priority and says so once", min=0, max=99),
    ParamSpec("max_observation_age_s", FLOAT, 0.5, "Wall clock: hold still when the newest observation is "
              "older than this (s); the policy config's own limit applies too (the stricter wins)",
              min=0.01, max=10.0),
    ParamSpec("warm_up_timeout_s", FLOAT, 300.0, "Deadline of the warm-up before the first episode (s): load the "
              "model, reach the server, one inference on an observation of the configured shapes (a JAX server "
              "compiles on it); the policy/status topic says warming up, ready or server error "
              "(ladder_ros/policies/warmup.py)", min=1.0, max=3600.0),
)

GRIPPER_TRIGGER = COMMON + (
    ParamSpec("aperture_joint", STR, "gripper_aperture", "JointState entry with the normalised gripper aperture"),
    ParamSpec("max_state_age_s", FLOAT, 0.5, "Wall clock: skip a control step when the newest joint state is "
              "older than this (s)", min=0.01, max=10.0),
)

VLM_VERIFIER = COMMON + (
    ParamSpec("backend", STR, "oracle", "Count backend (ladder_ros/vlm/config.py): oracle answers from the "
              "simulator's privileged state", choices=("oracle", "gemini", "local", "replay")),
    ParamSpec("model", STR, "", "Model id (gemini) or local model path (local); empty: the backend's default"),
    ParamSpec("robot", STR, "WidowX 250 robot arm", "Robot name in the planning prompt (Appendix C)"),
    ParamSpec("replay_path", STR, "", "JSONL of recorded replies (replay backend)"),
    ParamSpec("record_path", STR, "", "Append every prompt fingerprint and reply to this JSONL file; empty: off"),
    ParamSpec("aperture_joint", STR, "gripper_aperture", "JointState entry with the normalised gripper aperture"),
    ParamSpec("observation_wait_s", FLOAT, 5.0, "Wait at most this long (s) for the observation a query is "
              "about before answering with an error", min=0.01, max=600.0),
    ParamSpec("call_deadline_s", FLOAT, 50.0, "Longest one VLM call may take (s), every attempt and back-off "
              "included; a call that reaches it is a failed call (count unknown, not complete). The "
              "orchestrator's verifier_abort_after_s must exceed observation_wait_s + this "
              "(ladder_ros/vlm/config.py DEFAULT_CALL_DEADLINE_S)", min=1.0, max=3600.0),
)

ORCHESTRATOR = COMMON + (
    ParamSpec("suite", STR, "config/suites/tabletop.yaml", "Task suite YAML the episode tasks come from"),
    ParamSpec("variant", STR, Variant.PROPRIO_VERIFIER.value, "Orchestrator variant when a start command names "
              "none (paper Table 2)", choices=tuple(v.value for v in Variant)),
    ParamSpec("plan_source", STR, "reference", "Where an episode's plan comes from: the task's reference "
              "subgoals (the paper's cached plans) or the VLM planner of the vlm_verifier node, asked with the "
              "first frame (the privileged verifier always uses the reference)", choices=("reference", "planner")),
    ParamSpec("preset_options", STR_LIST, [], "Readings of the paper that differ from the preset's, as NAME=VALUE "
              "(after_last_subgoal=stay|restart|end, set_aside_exempt=ordered|order_constrained; "
              "ladder_ros/core/presets.py, docs/decisions.md)"),
    ParamSpec("planner_timeout_s", FLOAT, 120.0, "Abort the episode when no plan came within this long (s); "
              "with plan_source planner and a VLM backend it must exceed the vlm_verifier's observation_wait_s + "
              "call_deadline_s", min=0.1, max=3600.0),
    ParamSpec("verifier_retry_s", FLOAT, 5.0, "Resend a verification query unanswered for this long (s); the "
              "verifier is then reported unavailable", min=0.05, max=600.0),
    ParamSpec("verifier_abort_after_s", FLOAT, 60.0, "Abort the episode when the verifier stayed unavailable "
              "this long (s); until then the queue is kept and the episode resumes when it answers. With a VLM "
              "backend it must exceed the vlm_verifier's observation_wait_s + call_deadline_s, the longest a "
              "working verifier takes to answer", min=0.1, max=3600.0),
    ParamSpec("decision_resend_s", FLOAT, 2.0, "Lockstep: republish the current decision when the next step "
              "did not come for this long (s)", min=0.05, max=600.0),
    ParamSpec("score_timeout_s", FLOAT, 10.0, "Simulation: wait this long (s) for the sim bridge's score of a "
              "finished episode", min=0.0, max=600.0),
    ParamSpec("stall_warn_s", FLOAT, 10.0, "Stall watchdog: when no control step advanced for this long (s), "
              "the episode status names the input it waits for (pending verifier queries and plans have their "
              "own timers)", min=0.1, max=3600.0),
    ParamSpec("stall_abort_s", FLOAT, 60.0, "Stall watchdog: end the episode as aborted, with the missing input "
              "as the reason and its record kept, when no step advanced for this long (s); more than "
              "stall_warn_s", min=0.2, max=36000.0),
    ParamSpec("state_dir", STR, "", "Folder of the orchestrator's journal, which lets a restarted orchestrator "
              "end an episode it was killed in (empty: $ROS_HOME/ladder_ros, ~/.ros/ladder_ros by default)"),
    ParamSpec("policy_ready_wait_s", FLOAT, 330.0, "A start that comes while the policy warms up (policy/status) "
              "waits this long (s) for it to be ready, then is refused with the policy's status as the reason "
              "(ladder_ros/nodes/policy_gate.py); more than the policy's warm_up_timeout_s", min=0.0, max=7200.0),
)

EPISODE_RECORDER = COMMON + (
    ParamSpec("output_dir", STR, "runs/lab/recordings", "Folder of the recordings: one rosbag2 MCAP bag per "
              "episode (the lab folder the operator panel, report and export read by default)"),
    ParamSpec("graph", STR, "", "Graph description name, stored in the recording's metadata"),
    ParamSpec("config_files", STR_LIST, [], "Files (graph description, params) stored verbatim in the recording"),
    ParamSpec("close_grace_s", FLOAT, 0.5, "Keep recording this long (s) after the episode's final status, for "
              "messages still in flight", min=0.0, max=60.0),
    ParamSpec("labels_grace_s", FLOAT, 900.0, "While an operator panel publishes labels, keep an ended episode's "
              "recording open this long (s) for labels not yet marked final (0: close at once)", min=0.0,
              max=86400.0),
)


# The robot drivers (ladder_ros/nodes/widowx_driver.py, franka_driver.py): what both share.
ROBOT_DRIVER = COMMON + (
    ParamSpec("base_frame", STR, "base_link", "Frame of the end-effector pose (the arm's base)"),
    ParamSpec("aperture_joint", STR, "gripper_aperture", "Name of the JointState entry carrying the normalised "
              "gripper aperture (0 closed, 1 open)"),
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
    ParamSpec("stall_readings", INT, 2, "Readings in a row (one per control period) a joint must be off its profile "
              "before it counts as stalled", min=1, max=50),
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


# The dress rehearsal (docs/rehearsal.md): the WidowX twin that owns the arm's motors and the scene on the wall
# clock, and the openpi-protocol server that answers as the configured policy with the scripted expert's chunks.
WIDOWX_TWIN = COMMON + (
    ParamSpec("suite", STR, "config/suites/tabletop.yaml", "Task suite YAML whose scenes the twin builds (the "
              "built-in MuJoCo tabletop's; a path, relative paths resolve against the package share folder)"),
    ParamSpec("robot_name", STR, "wx250s", "Namespace the twin serves xs_sdk in (/<robot_name>/...): the driver's "
              "robot_name"),
    ParamSpec("start_joints", FLOAT_LIST, list(WX250S_SLEEP), "Where the arm stands when the twin starts (rad, "
              "waist..wrist_rotate): xs_sdk's sleep pose (interbotix_xsarm_control config/wx250s.yaml)", size=6,
              min=-3.2, max=3.2),
    ParamSpec("initial_task", STR, "", "Task whose scene (layout 0) stands before the first episode, so the camera "
              "has something to see; empty: the suite's first task"),
    ParamSpec("physics_period_s", FLOAT, 0.02, "The physics catches up with the wall clock this often (s), in the "
              "tabletop's 4 ms substeps, the gripper driven to where the motors put it at the end of each catch-up",
              min=0.004, max=0.5),
    ParamSpec("camera_width", INT, 256, "Width of the rendered camera image (px); 640x480 is a RealSense's "
              "colour stream, 256x256 what the CPU renders at 15 fps on two cores (docs/rehearsal.md)", min=16,
              max=2048),
    ParamSpec("camera_height", INT, 256, "Height of the rendered camera image (px)", min=16, max=2048),
    ParamSpec("camera_fps", FLOAT, 15.0, "Rendering rate of the twin's camera on the wall clock (Hz); a frame due "
              "while the previous one renders is skipped (counted)", min=1.0, max=60.0),
    ParamSpec("render_depth", BOOL, False, "Also render the camera's exact depth (m), which the camera node "
              "publishes as the sensor's aligned depth (a second render pass per frame)"),
    ParamSpec("camera_name", STR, "main", "The camera node's camera_name: the frame channel is named after it, the "
              "ROS domain and the namespace (ladder_ros/camera/shared_frame.py)"),
    ParamSpec("frame_channel", STR, "", "The shared-memory frame channel to write (a file name under /dev/shm); "
              "empty: the one named after the ROS domain, the namespace and camera_name"),
)

# The Franka's rehearsal (docs/rehearsal_franka.md): franky-sim in place of the arm, no scene.
FRANKA_TWIN = COMMON + (
    ParamSpec("host", STR, "127.0.0.1", "Loopback address franky-sim listens at (ports 1337 and 1338, libfranka's): "
              "the franka_driver's host"),
    ParamSpec("start_joints", FLOAT_LIST, list(FRANKA_READY), "Where the simulated arm stands when it starts (rad, "
              "joints 1-7): DROID's reset pose, the driver's ready_joints", size=7, min=-4.6, max=4.6),
    ParamSpec("behind_warn_s", FLOAT, 1.0, "Say so (diagnostics warn) once franky-sim's 1 kHz loop has fallen this far "
              "behind the wall clock (s): its arm then moves slower than commanded", min=0.01, max=3600.0),
    ParamSpec("state_rate_hz", FLOAT, 50.0, "Publish the simulated arm's own joint states on twin/joint_states this "
              "often (Hz; sampled at 100 Hz of simulated time)", min=1.0, max=100.0),
)

REHEARSAL_SERVER = COMMON + (
    ParamSpec("policy", STR, "bridge_pi0_server", "The policy config the policy node runs (a name under policies/ or "
              "a path): the server listens at its server.host/port (127.0.0.1 only) and answers in its chunk "
              "length, action and state conventions"),
    ParamSpec("inference_delay_ms", FLOAT, 80.0, "Time each inference takes (ms) before the chunk is sent, as a "
              "GPU server's would (the rehearsal's 80, 150, 400, 800)", min=0.0, max=10000.0),
    ParamSpec("jitter_ms", FLOAT, 15.0, "Standard deviation of the inference time (ms; normal, never below 0)",
              min=0.0, max=10000.0),
    ParamSpec("noise", STR, "bridge_like", "Scripted expert execution noise preset, as in simulation "
              "(ladder_ros/policies/scripted_expert.py ExpertNoise)", choices=("off", "bridge_like")),
    ParamSpec("privileged_wait_s", FLOAT, 2.0, "A request that comes before the twin's privileged state of the "
              "current episode waits this long for it (s), then is answered with a hold chunk", min=0.0,
              max=60.0),
)


def _stall_bounds_ordered(values: Mapping[str, Any], node: str) -> None:
    if values["stall_abort_s"] <= values["stall_warn_s"]:
        raise ConfigError(f"parameter {node}.stall_abort_s: must be more than stall_warn_s "
                          f"({values['stall_warn_s']}), got {values['stall_abort_s']}")


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


# Rules between parameters of one node, checked before start and by the node itself.
NODE_CHECKS = {"orchestrator": _stall_bounds_ordered, "widowx_driver": _widowx_ranges_ordered,
               "franka_driver": _franka_joints_named}

NODE_PARAMETERS: dict[str, tuple[ParamSpec, ...]] = {
    "sim_bridge": SIM_BRIDGE,
    "camera": CAMERA,
    "depth": DEPTH,
    "policy": POLICY,
    "gripper_trigger": GRIPPER_TRIGGER,
    "vlm_verifier": VLM_VERIFIER,
    "orchestrator": ORCHESTRATOR,
    "episode_recorder": EPISODE_RECORDER,
    "widowx_driver": WIDOWX_DRIVER,
    "franka_driver": FRANKA_DRIVER,
    "widowx_twin": WIDOWX_TWIN,
    "rehearsal_server": REHEARSAL_SERVER,
    "franka_twin": FRANKA_TWIN,
}


# Verifier backends whose calls take real time (bounded by call_deadline_s); oracle and replay answer at once.
TIMED_VERIFIER_BACKENDS = ("gemini", "local")


def check_verifier_deadline(orchestrator: Mapping[str, Any], verifier: Mapping[str, Any],
                            names: tuple[str, str] = ("orchestrator", "vlm_verifier")) -> None:
    """Refuse an orchestrator that would give up on a working VLM verifier.

    A query is answered within the verifier's ``observation_wait_s + call_deadline_s`` (the call
    deadline bounds every attempt and back-off of a VLM call), so ``verifier_abort_after_s`` must
    exceed that, and so must ``planner_timeout_s`` when the plan comes from the planner. Oracle and
    replay backends answer at once and are not checked. Both mappings hold checked values.
    """
    if verifier.get("backend") not in TIMED_VERIFIER_BACKENDS:
        return
    answer_within = float(verifier["observation_wait_s"]) + float(verifier["call_deadline_s"])
    limits = [("verifier_abort_after_s", "a query")]
    if orchestrator.get("plan_source") == "planner":
        limits.append(("planner_timeout_s", "a plan"))
    for name, what in limits:
        if float(orchestrator[name]) <= answer_within:
            raise ConfigError(
                f"parameter {names[0]}.{name} = {orchestrator[name]:g} s must exceed {names[1]}.observation_wait_s "
                f"+ {names[1]}.call_deadline_s = {answer_within:g} s: a {verifier['backend']} verifier may take that "
                f"long to answer {what}; raise {name} or lower call_deadline_s")


def check_node_parameters(executable: str, values: Mapping[str, Any], node: str | None = None,
                          strict: frozenset[str] | set[str] = frozenset()) -> dict[str, Any]:
    """Check ``values`` (from a params file and overrides) for one node; returns them with defaults filled in.

    Unknown names are an error naming the nearest valid one: a misspelt parameter would otherwise
    be silently ignored. Names in ``strict`` are read by the node itself (a params file), so their
    type must be exactly what ROS 2 accepts (no integer for a double).
    """
    if executable not in NODE_PARAMETERS:
        raise ConfigError(f"unknown node executable {executable!r}; valid: {', '.join(sorted(NODE_PARAMETERS))}")
    specs = {s.name: s for s in NODE_PARAMETERS[executable]}
    label = node or executable
    for name in values:
        if name not in specs and name != "use_sim_time":
            raise ConfigError(f"unknown parameter {label}.{name}{did_you_mean(name, specs)}; "
                              f"valid: {', '.join(sorted(specs))}")
    checked = {name: spec.default for name, spec in specs.items()}
    for name, value in values.items():
        if name in specs:
            checked[name] = specs[name].check(value, label, strict=name in strict)
    rule = NODE_CHECKS.get(executable)
    if rule is not None:
        rule(checked, label)
    return checked
