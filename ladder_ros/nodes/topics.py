"""Every topic of the ladder_ros graph: name, type, QoS, rate, who publishes and who listens.

Names are relative, so a graph's namespace (``/widowx``) prefixes them all. The QoS kinds
(docs/graph.md, "QoS"): images and their camera info best-effort sensor data; commands, per-step
streams and events reliable; latched state (episode status, current subgoal) reliable +
transient-local depth 1, so a node that starts late or restarts gets it at once. The README's topic
table is generated from this module (``python -m ladder_ros.nodes.topics``). No rclpy here: QoS
objects are built in :mod:`ladder_ros.nodes.runtime`.
"""

from __future__ import annotations

from dataclasses import dataclass

SENSOR = "sensor"  # best effort, volatile, keep last 5 (rclpy qos_profile_sensor_data)
STREAM = "stream"  # reliable, volatile, keep last 50: one message per control step, never dropped
EVENTS = "events"  # reliable, volatile, keep last 200: bursts of several per step
LATCHED = "latched"  # reliable, transient local, keep last 1

QOS_TEXT = {
    SENSOR: "best effort, volatile, depth 5",
    STREAM: "reliable, volatile, depth 50",
    EVENTS: "reliable, volatile, depth 200",
    LATCHED: "reliable, transient local, depth 1",
}
QOS_DEPTH = {SENSOR: 5, STREAM: 50, EVENTS: 200, LATCHED: 1}

STRING = "std_msgs/msg/String"


@dataclass(frozen=True)
class TopicSpec:
    name: str
    type: str
    qos: str
    rate: str
    publisher: str
    subscribers: tuple[str, ...]
    description: str
    document: str = ""  # the JSON document (ladder_ros.messages) a String carries
    external: bool = False  # shared with nodes of other packages on a robot (drivers, cameras)


IMAGE = TopicSpec("camera/image_raw", "sensor_msgs/msg/Image", SENSOR, "control rate",
                  "sim_bridge (robot: camera driver)", ("policy", "vlm_verifier", "episode_recorder"),
                  "RGB camera image (rgb8); stamp = the step's time", external=True)
CAMERA_INFO = TopicSpec("camera/camera_info", "sensor_msgs/msg/CameraInfo", SENSOR, "with every image",
                        "sim_bridge (robot: camera driver)", ("episode_recorder", "depth estimation"),
                        "Intrinsics of the camera of `camera/image_raw` (K, P; plumb_bob, no distortion); same "
                        "stamp and frame as its image", external=True)
JOINT_STATES = TopicSpec("joint_states", "sensor_msgs/msg/JointState", STREAM, "control rate",
                         "sim_bridge (robot: driver)", ("gripper_trigger", "policy", "vlm_verifier",
                                                        "episode_recorder"),
                         "Arm joints plus the normalised gripper aperture (entry `gripper_aperture`, 0 closed, "
                         "1 open); stamp = the step's time", external=True)
EE_POSE = TopicSpec("ee_pose", "geometry_msgs/msg/PoseStamped", STREAM, "control rate",
                    "sim_bridge (robot: driver)", ("gripper_trigger", "policy", "vlm_verifier", "episode_recorder"),
                    "End-effector pose in the robot base frame (m, quaternion)", external=True)
PRIVILEGED = TopicSpec("sim/privileged_state", STRING, STREAM, "control rate", "sim_bridge",
                       ("orchestrator", "policy", "vlm_verifier", "episode_recorder"),
                       "Simulation only: object poses, per-destination counts, per-subgoal predicates",
                       document="PrivilegedStateDoc")
SCORE = TopicSpec("sim/episode_score", STRING, EVENTS, "once per episode", "sim_bridge",
                  ("orchestrator", "episode_recorder"),
                  "Simulation only: the privileged score of a finished episode", document="EpisodeScoreDoc")
GRIPPER_EVENTS = TopicSpec("gripper/events", STRING, STREAM, "control rate", "gripper_trigger",
                           ("orchestrator", "episode_recorder"),
                           "Per-step gripper monitor output: attempt ends (trigger), releases (verifier's "
                           "detector), open or not", document="GripperEventsDoc")
DECISION = TopicSpec("orchestrator/decision", STRING, STREAM, "control rate", "orchestrator",
                     ("policy", "sim_bridge", "episode_recorder"),
                     "The step's final instruction (after any verification of that step); lockstep token",
                     document="DecisionDoc")
CURRENT_SUBGOAL = TopicSpec("orchestrator/current_subgoal", "std_msgs/msg/String", LATCHED, "on change",
                            "orchestrator", ("operator panel", "episode_recorder"),
                            "The instruction the low-level policy follows now (empty: hold still)")
EVENTS_TOPIC = TopicSpec("orchestrator/events", STRING, EVENTS, "on event", "orchestrator",
                         ("operator panel", "episode_recorder"),
                         "Episode events: subgoal started/completed/advanced, attempts, queries, queue "
                         "changes, finish", document="EpisodeEventDoc")
VERIFY_REQUEST = TopicSpec("verifier/request", STRING, EVENTS, "on query", "orchestrator",
                           ("vlm_verifier", "episode_recorder"), "Count query about one step's observation",
                           document="VerificationRequestDoc")
VERIFY_RESULT = TopicSpec("verifier/result", STRING, EVENTS, "on answer", "vlm_verifier",
                          ("orchestrator", "episode_recorder"), "Count answer with its source and latency",
                          document="VerificationResultDoc")
PLAN_REQUEST = TopicSpec("planner/request", STRING, EVENTS, "once per episode", "orchestrator",
                         ("vlm_verifier", "episode_recorder"),
                         "Plan the episode's subgoals from its first frame (orchestrator plan_source: planner)",
                         document="PlanRequestDoc")
PLAN_RESULT = TopicSpec("planner/result", STRING, EVENTS, "once per episode", "vlm_verifier",
                        ("orchestrator", "episode_recorder"), "The planner's subgoals, or why there are none, "
                        "with the raw reply", document="PlanResultDoc")
ACTION = TopicSpec("policy/action", "trajectory_msgs/msg/JointTrajectory", STREAM, "control rate", "policy",
                   ("sim_bridge (robot: driver)", "episode_recorder"),
                   "7-D action as one trajectory point over the axes ee_dx, ee_dy, ee_dz (m), ee_droll, "
                   "ee_dpitch, ee_dyaw (rad, Euler XYZ), gripper (+1 open, -1 closed); stamp = the step it "
                   "answers", external=True)
EPISODE_COMMAND = TopicSpec("episode/command", STRING, EVENTS, "on command", "operator panel / CLI",
                            ("orchestrator", "episode_recorder"), "Start, stop or abort an episode",
                            document="EpisodeCommand")
EPISODE_STATUS = TopicSpec("episode/status", STRING, LATCHED, "on change", "orchestrator",
                           ("all nodes", "operator panel", "episode_recorder"),
                           "The episode: id, task, plan, clock origin, state; its result once over",
                           document="EpisodeStatus")

TOPICS: tuple[TopicSpec, ...] = (IMAGE, CAMERA_INFO, JOINT_STATES, EE_POSE, PRIVILEGED, SCORE, GRIPPER_EVENTS, DECISION,
                                 CURRENT_SUBGOAL, EVENTS_TOPIC, VERIFY_REQUEST, VERIFY_RESULT, PLAN_REQUEST,
                                 PLAN_RESULT, ACTION,
                                 EPISODE_COMMAND, EPISODE_STATUS)

# Services (std_srvs/srv/Trigger) of the orchestrator, relative to its namespace.
STOP_SERVICE = "episode/stop"
ABORT_SERVICE = "episode/abort"
SERVICES = (
    (STOP_SERVICE, "std_srvs/srv/Trigger", "orchestrator", "End the running episode (operator stop)"),
    (ABORT_SERVICE, "std_srvs/srv/Trigger", "orchestrator", "End the running episode as aborted"),
)


def markdown_table() -> str:
    """The README's topic table."""
    rows = ["| topic | type | QoS | rate | publisher | subscribers | what |",
            "| --- | --- | --- | --- | --- | --- | --- |"]
    for t in TOPICS:
        kind = t.type + (f" ({t.document})" if t.document else "")
        rows.append(f"| `{t.name}` | {kind} | {QOS_TEXT[t.qos]} | {t.rate} | {t.publisher} | "
                    f"{', '.join(t.subscribers)} | {t.description} |")
    for name, kind, server, what in SERVICES:
        rows.append(f"| `{name}` (service) | {kind} | services | on call | {server} | operator panel / CLI | {what} |")
    return "\n".join(rows)


if __name__ == "__main__":
    print(markdown_table())
