"""Every ROS parameter of every ladder_ros node, declared once, as plain data.

Nodes declare these with descriptors (description, range, read-only) at startup, so a bad value
fails with its name before the node does anything (docs/launch.md). ``ladder-ros up`` and the
launch files check a params file against the same specs before any process starts, so a typo or an
out-of-range value is one error line naming the node and the parameter, and nothing is left running.
This module does not import rclpy.
"""

from __future__ import annotations

from typing import Any, Mapping

from ladder_ros.core.action_conventions import RotationConvention
from ladder_ros.core.errors import ConfigError, did_you_mean
from ladder_ros.core.orchestrator import Variant
from ladder_ros.specs.param_spec import (
    APERTURE_JOINT, BASE_FRAME, BOOL, COMMON, EXPERT_NOISE, FLOAT, INT, STR, STR_LIST, ParamSpec)
from ladder_ros.specs.robot_parameters import (
    FRANKA_DRIVER, ROBOT_NODE_CHECKS, WIDOWX_DRIVER)
from ladder_ros.sim.registry import BACKENDS as SIMULATORS

SIM_BRIDGE = COMMON + (
    ParamSpec("simulator", STR, "mujoco_tabletop", "Simulator backend (ladder_ros/sim/registry.py)",
              choices=tuple(sorted(SIMULATORS))),
    ParamSpec("suite", STR, "config/suites/tabletop.yaml", "Task suite YAML the simulator builds scenes from "
              "(a path; relative paths resolve against the package share folder)"),
    ParamSpec("render", BOOL, True, "Render and publish the camera image every step"),
    ParamSpec("image_size", INT, 256, "Camera image side (pixels; the MuJoCo tabletop renders square images)",
              min=16, max=2048),
    BASE_FRAME,
    ParamSpec("camera_frame", STR, "camera_color_optical_frame", "Frame id of the camera image"),
    APERTURE_JOINT,
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
              "names it (ladder_ros/instruments/cameras/shared_frame.py)"),
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
              "instrument that reads privileged state) or a path to a policy YAML (ladder_ros/policies/config.py); "
              "the node's one policy, under the config's own name, when policies is empty"),
    ParamSpec("policies", STR_LIST, [], "Several policies in one graph, each as NAME=CONFIG (CONFIG a name under "
              "policies/ or a path; NAME of [A-Za-z0-9_.-]): an episode runs under the one its start command names "
              "(EpisodeCommand.policy), else default_policy; empty: the policy parameter alone "
              "(ladder_ros/nodes/policy/roster.py)"),
    ParamSpec("default_policy", STR, "", "The name an episode runs under when its start names none; empty: the "
              "first of policies"),
    ParamSpec("warm_up", STR, "at_start", "When each policy warms up: at_start (every policy, before the first "
              "episode) or on_first_use (the default at start, another when a start command first names it; that "
              "start waits for the warm-up, the orchestrator's policy_ready_wait_s)",
              choices=("at_start", "on_first_use")),
    EXPERT_NOISE,
    ParamSpec("rotation_convention", STR, "", "How the policy's rotation numbers are meant, replacing the "
              "convention the policy declares (empty: the policy's own); its actions are converted to the "
              "Euler XYZ of policy/action (ladder_ros/core/action_conventions.py)",
              choices=("",) + tuple(c.value for c in RotationConvention)),
    ParamSpec("execution", STR, "", "Wall clock: how chunks run, replacing the policy config's execution.mode "
              "(empty: the config's; realtime by default): realtime overlaps inference with execution, each chunk "
              "anchored where its observation was taken; synchronous is the paper's rule, a chunk of deltas "
              "requested once the queue is empty (ladder_ros/policies/executor.py). Lockstep always runs the "
              "paper's rule", choices=("", "synchronous", "realtime")),
    APERTURE_JOINT,
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
    APERTURE_JOINT,
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
    APERTURE_JOINT,
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
              "(ladder_ros/nodes/orchestrator/policy_gate.py); more than the policy's warm_up_timeout_s", min=0.0,
              max=7200.0),
    ParamSpec("unavailable_policy", STR, "refuse", "A start naming a policy that cannot act (policy/status: its "
              "server is gone, or failed): refuse it at once with the reason, or wait (at most policy_ready_wait_s) "
              "for that policy to be ready again, then refuse it; never another policy instead",
              choices=("refuse", "wait")),
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


def _stall_bounds_ordered(values: Mapping[str, Any], node: str) -> None:
    if values["stall_abort_s"] <= values["stall_warn_s"]:
        raise ConfigError(f"parameter {node}.stall_abort_s: must be more than stall_warn_s "
                          f"({values['stall_warn_s']}), got {values['stall_abort_s']}")


def _policy_names_valid(values: Mapping[str, Any], node: str) -> None:
    """Every entry of policies is NAME=CONFIG with a fresh name, and default_policy is one of the names."""
    from ladder_ros.policies.factory import parse_policy_entry

    names = []
    for text in values["policies"]:
        try:
            name, _ = parse_policy_entry(text)
        except ConfigError as exc:
            raise ConfigError(f"parameter {node}.policies: {exc}") from None
        if name is None:
            raise ConfigError(f"parameter {node}.policies: entry {text!r} is not NAME=CONFIG (e.g. "
                              "ckpt_a=bridge_pi0_server)")
        if name in names:
            raise ConfigError(f"parameter {node}.policies: the name {name!r} is given twice")
        names.append(name)
    if values["default_policy"] and names and values["default_policy"] not in names:
        raise ConfigError(f"parameter {node}.default_policy: {values['default_policy']!r} is not one of the "
                          f"policies ({', '.join(names)})")


# Rules between parameters of one node, checked before start and by the node itself.
NODE_CHECKS = {"orchestrator": _stall_bounds_ordered, "policy": _policy_names_valid, **ROBOT_NODE_CHECKS}

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


# Parameters that must hold one value across a graph's nodes; an empty base_frame (the camera's) names none.
SHARED_PARAMETERS = ("aperture_joint", "base_frame", "preset")


def check_shared_parameters(nodes: Mapping[str, Mapping[str, Any]]) -> None:
    """Refuse a graph whose nodes disagree on a shared parameter (``nodes``: node name -> checked values).

    A gripper trigger reading another joint state entry than the driver publishes, or a driver and a sim
    bridge on different presets, would run without an error and measure nonsense.
    """
    for name in SHARED_PARAMETERS:
        values = {node: values[name] for node, values in nodes.items() if values.get(name, "") != ""}
        if len(set(values.values())) > 1:
            listed = ", ".join(f"{node}.{name} = {value!r}" for node, value in sorted(values.items()))
            raise ConfigError(f"the graph's nodes disagree on {name} ({listed}): set it once for every node "
                              f"(the params file's /** section)")


def check_node_parameters(executable: str, values: Mapping[str, Any], node: str | None = None,
                          strict: frozenset[str] | set[str] = frozenset(),
                          table: Mapping[str, tuple[ParamSpec, ...]] = NODE_PARAMETERS) -> dict[str, Any]:
    """Check ``values`` (from a params file and overrides) for one node; returns them with defaults filled in.

    Unknown names are an error naming the nearest valid one: a misspelt parameter would otherwise
    be silently ignored. Names in ``strict`` are read by the node itself (a params file), so their
    type must be exactly what ROS 2 accepts (no integer for a double). ``table``: the executables' specs
    (the product's nodes; bringup adds the instruments').
    """
    if executable not in table:
        raise ConfigError(f"unknown node executable {executable!r}; valid: {', '.join(sorted(table))}")
    specs = {s.name: s for s in table[executable]}
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
