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
from ladder_ros.core.errors import ConfigError
from ladder_ros.core.orchestrator import Variant
from ladder_ros.core.presets import PRESETS
from ladder_ros.evaluation.components import POLICIES
from ladder_ros.messages import CLOCK_MODES, LOCKSTEP

BOOL, INT, FLOAT, STR, STR_LIST = "bool", "int", "float", "str", "str_list"


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

    def check(self, value: Any, node: str = "") -> Any:
        """``value`` if it is valid for this parameter; else a :class:`ConfigError` naming it."""
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
            value = float(value)
        elif self.type == STR:
            if not isinstance(value, str):
                raise fail("must be a string")
        elif self.type == STR_LIST:
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise fail("must be a list of strings")
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
    ParamSpec("simulator", STR, "mujoco_tabletop", "Simulator backend (ladder_ros/sim/registry.py)"),
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
)

POLICY = COMMON + (
    ParamSpec("policy", STR, "scripted_expert", "Low-level policy backend (simulation: the scripted expert, a "
              "test instrument that reads privileged state; ladder_ros/evaluation/components.py)",
              choices=POLICIES),
    ParamSpec("noise", STR, "bridge_like", "Scripted expert execution noise preset "
              "(ladder_ros/policies/scripted_expert.py ExpertNoise)", choices=("off", "bridge_like")),
    ParamSpec("rotation_convention", STR, "", "How the policy's rotation numbers are meant, replacing the "
              "convention the policy declares (empty: the policy's own); its actions are converted to the "
              "Euler XYZ of policy/action (ladder_ros/core/action_conventions.py)",
              choices=("",) + tuple(c.value for c in RotationConvention)),
    ParamSpec("aperture_joint", STR, "gripper_aperture", "JointState entry with the normalised gripper aperture"),
    ParamSpec("max_observation_age_s", FLOAT, 0.5, "Wall clock: hold still when the newest observation is "
              "older than this (s)", min=0.01, max=10.0),
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
    ParamSpec("planner_timeout_s", FLOAT, 120.0, "Abort the episode when no plan came within this long (s)",
              min=0.1, max=3600.0),
    ParamSpec("verifier_retry_s", FLOAT, 5.0, "Resend a verification query unanswered for this long (s); the "
              "verifier is then reported unavailable", min=0.05, max=600.0),
    ParamSpec("verifier_abort_after_s", FLOAT, 60.0, "Abort the episode when the verifier stayed unavailable "
              "this long (s); until then the queue is kept and the episode resumes when it answers",
              min=0.1, max=3600.0),
    ParamSpec("decision_resend_s", FLOAT, 2.0, "Lockstep: republish the current decision when the next step "
              "did not come for this long (s)", min=0.05, max=600.0),
    ParamSpec("score_timeout_s", FLOAT, 10.0, "Simulation: wait this long (s) for the sim bridge's score of a "
              "finished episode", min=0.0, max=600.0),
)

EPISODE_RECORDER = COMMON + (
    ParamSpec("output_dir", STR, "runs/recordings", "Folder of the recordings: one rosbag2 MCAP bag per episode"),
    ParamSpec("graph", STR, "", "Graph description name, stored in the recording's metadata"),
    ParamSpec("config_files", STR_LIST, [], "Files (graph description, params) stored verbatim in the recording"),
    ParamSpec("close_grace_s", FLOAT, 0.5, "Keep recording this long (s) after the episode's final status, for "
              "messages still in flight", min=0.0, max=60.0),
)

NODE_PARAMETERS: dict[str, tuple[ParamSpec, ...]] = {
    "sim_bridge": SIM_BRIDGE,
    "policy": POLICY,
    "gripper_trigger": GRIPPER_TRIGGER,
    "vlm_verifier": VLM_VERIFIER,
    "orchestrator": ORCHESTRATOR,
    "episode_recorder": EPISODE_RECORDER,
}


def check_node_parameters(executable: str, values: Mapping[str, Any], node: str | None = None) -> dict[str, Any]:
    """Check ``values`` (from a params file and overrides) for one node; returns them with defaults filled in.

    Unknown names are an error: a misspelt parameter would otherwise be silently ignored.
    """
    if executable not in NODE_PARAMETERS:
        raise ConfigError(f"unknown node executable {executable!r}; valid: {', '.join(sorted(NODE_PARAMETERS))}")
    specs = {s.name: s for s in NODE_PARAMETERS[executable]}
    label = node or executable
    for name in values:
        if name not in specs and name != "use_sim_time":
            raise ConfigError(f"unknown parameter {label}.{name}; valid: {', '.join(sorted(specs))}")
    checked = {name: spec.default for name, spec in specs.items()}
    for name, value in values.items():
        if name in specs:
            checked[name] = specs[name].check(value, label)
    return checked
