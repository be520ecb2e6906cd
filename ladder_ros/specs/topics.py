"""Every topic of the ladder_ros graph: name, type, QoS, rate, who publishes and who listens.

Names are relative, so a graph's namespace (``/widowx``) prefixes them all. The QoS kinds
(docs/graph.md, "QoS"): images and their camera info best-effort sensor data; commands, per-step
streams and events reliable; latched state (episode status, current subgoal) reliable +
transient-local depth 1, so a node that starts late or restarts gets it at once. The graph's own
messages are those of ``ladder_ros_interfaces`` (:func:`interface`; docs/interfaces.md, "The messages"). The
topic table of docs/interfaces.md is generated from this module (``python -m ladder_ros.specs.topics``). No
rclpy here: QoS objects are built in :mod:`ladder_ros.runtime.endpoints`.
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

INTERFACES = "ladder_ros_interfaces"  # the graph's own messages (interfaces/ladder_ros_interfaces)


def interface(name: str) -> str:
    """The type name of one of the graph's own messages."""
    return f"{INTERFACES}/msg/{name}"


@dataclass(frozen=True)
class TopicSpec:
    name: str
    type: str
    qos: str
    rate: str
    publisher: str
    subscribers: tuple[str, ...]
    description: str
    external: bool = False  # shared with nodes of other packages on a robot (drivers, cameras)


IMAGE = TopicSpec("camera/image_raw", "sensor_msgs/msg/Image", SENSOR, "control rate",
                  "sim_bridge (robot: camera)", ("policy", "vlm_verifier", "depth", "episode_recorder"),
                  "RGB camera image (rgb8); stamp = the step's time (robot: the device's capture time)", external=True)
CAMERA_INFO = TopicSpec("camera/camera_info", "sensor_msgs/msg/CameraInfo", SENSOR, "with each image",
                        "sim_bridge (the simulator camera's own intrinsics) / camera (robot, from "
                        "calibration/<robot>_<camera>.yaml)", ("depth", "episode_recorder"),
                        "Intrinsics of camera/image_raw (K, D, R, P; simulators: plumb_bob, no distortion), same "
                        "stamp and frame as the image", external=True)
SENSOR_DEPTH = TopicSpec("camera/aligned_depth_to_color/image_raw", "sensor_msgs/msg/Image", SENSOR, "with each image",
                         "camera (RealSense depth) / sim_bridge (publish_depth: the simulator's exact depth)",
                         ("depth", "episode_recorder"),
                         "Measured depth aligned to camera/image_raw (32FC1, m, NaN = none; 16UC1 mm also read): "
                         "the sensor on a robot, the truth in simulation; stamp = its image's", external=True)
DEPTH = TopicSpec("camera/depth/image_raw", "sensor_msgs/msg/Image", SENSOR, "per image, as fast as the model",
                  "depth (backend: moge2, depth_anything_v2 or sensor)", ("episode_recorder",),
                  "Metric depth aligned to camera/image_raw (32FC1, m, NaN = none); stamp and frame = its image's",
                  external=True)
JOINT_STATES = TopicSpec("joint_states", "sensor_msgs/msg/JointState", STREAM, "control rate",
                         "sim_bridge (robot: driver)", ("gripper_trigger", "policy", "vlm_verifier",
                                                        "episode_recorder"),
                         "Arm joints plus the normalised gripper aperture (entry `gripper_aperture`, 0 closed, "
                         "1 open); stamp = the step's time", external=True)
EE_POSE = TopicSpec("ee_pose", "geometry_msgs/msg/PoseStamped", STREAM, "control rate",
                    "sim_bridge (robot: driver)", ("gripper_trigger", "policy", "vlm_verifier", "episode_recorder"),
                    "End-effector pose in the robot base frame (m, quaternion)", external=True)
PRIVILEGED = TopicSpec("sim/privileged_state", interface("PrivilegedState"), STREAM, "control rate", "sim_bridge",
                       ("orchestrator", "policy", "vlm_verifier", "episode_recorder"),
                       "Simulation only: object poses, per-destination counts, per-subgoal predicates")
SCORE = TopicSpec("sim/episode_score", interface("EpisodeScore"), EVENTS, "once per episode", "sim_bridge",
                  ("orchestrator", "episode_recorder"),
                  "Simulation only: the privileged score of a finished episode")
GRIPPER_EVENTS = TopicSpec("gripper/events", interface("GripperEvents"), STREAM, "control rate", "gripper_trigger",
                           ("orchestrator", "episode_recorder"),
                           "Per-step gripper monitor output: attempt ends (trigger), releases (verifier's "
                           "detector), open or not")
DECISION = TopicSpec("orchestrator/decision", interface("Decision"), STREAM, "control rate", "orchestrator",
                     ("policy", "sim_bridge", "episode_recorder"),
                     "The step's final instruction (after any verification of that step); lockstep token")
CURRENT_SUBGOAL = TopicSpec("orchestrator/current_subgoal", "std_msgs/msg/String", LATCHED, "on change",
                            "orchestrator", ("operator panel", "episode_recorder"),
                            "The instruction the low-level policy follows now (empty: hold still)")
EVENTS_TOPIC = TopicSpec("orchestrator/events", interface("EpisodeEvent"), EVENTS, "on event", "orchestrator",
                         ("operator panel", "episode_recorder"),
                         "Episode events: subgoal started/completed/advanced, attempts, queries, queue "
                         "changes, finish")
VERIFY_REQUEST = TopicSpec("verifier/request", interface("VerificationRequest"), EVENTS, "on query", "orchestrator",
                           ("vlm_verifier", "episode_recorder"), "Count query about one step's observation")
VERIFY_RESULT = TopicSpec("verifier/result", interface("VerificationResult"), EVENTS, "on answer", "vlm_verifier",
                          ("orchestrator", "episode_recorder"), "Count answer with its source and latency")
PLAN_REQUEST = TopicSpec("planner/request", interface("PlanRequest"), EVENTS, "once per episode", "orchestrator",
                         ("vlm_verifier", "episode_recorder"),
                         "Plan the episode's subgoals from its first frame (orchestrator plan_source: planner)")
PLAN_RESULT = TopicSpec("planner/result", interface("PlanResult"), EVENTS, "once per episode", "vlm_verifier",
                        ("orchestrator", "episode_recorder"), "The planner's subgoals, or why there are none, "
                        "with the raw reply")
ACTION = TopicSpec("policy/action", "trajectory_msgs/msg/JointTrajectory", STREAM, "control rate", "policy",
                   ("sim_bridge (robot: driver)", "episode_recorder"),
                   "7-D action as one trajectory point over the axes ee_dx, ee_dy, ee_dz (m), ee_droll, "
                   "ee_dpitch, ee_dyaw (rad, Euler XYZ), gripper (+1 open, -1 closed); stamp = the step it "
                   "answers (robot: when it was published); a joint-position policy publishes its config's axes "
                   "instead", external=True)
ACTION_TAG = TopicSpec("policy/action_tag", interface("ActionTag"), STREAM, "control rate", "policy",
                       ("episode_recorder",),
                       "Per action: its subgoal, the stamp of the observation its chunk came from, the chunk id "
                       "and the index in the chunk, the chunk's inference latency")
# One diagnostics topic, absolute as ROS tools expect it (rqt_robot_monitor, diagnostic_aggregator);
# each status names its node and hardware.
DIAGNOSTICS = TopicSpec("/diagnostics", "diagnostic_msgs/msg/DiagnosticArray", STREAM, "1 Hz",
                        "camera, depth, policy, robot drivers, episode_recorder",
                        ("operator panel", "episode_recorder", "rqt_robot_monitor"),
                        "Health: camera and depth (backend, frames, drops, latency, rate, depth error against "
                        "the measured depth when compared); policy (holding or acting and why, inference "
                        "latency, control-period error, idle periods, chunks accepted and rejected); drivers (control "
                        "period and jitter, action age, inverse kinematics or gripper read times, commands held "
                        "and why); recorder (the open episode, topics whose publishers it has not matched yet)",
                        external=True)
EPISODE_COMMAND = TopicSpec("episode/command", interface("EpisodeCommand"), EVENTS, "on command",
                            "operator panel / CLI; a node that lost its episode state (abort)",
                            ("orchestrator", "episode_recorder"), "Start, stop or abort an episode")
COMMAND_REPLY = TopicSpec("episode/command_reply", interface("EpisodeCommandReply"), EVENTS, "on command",
                          "orchestrator",
                          ("operator panel / CLI", "episode_recorder"),
                          "Each command accepted or refused, with the reason; a refused start never touches the "
                          "episode status")
SAFETY = TopicSpec("safety/interventions", interface("SafetyIntervention"), EVENTS, "on intervention",
                   "sim_bridge (robot: driver)",
                   ("orchestrator", "operator panel", "episode_recorder"),
                   "A safety intervention: an action refused (held still instead) or clipped into the workspace, "
                   "a watchdog stop, an e-stop, a robot error; kind, axis, value, limit, and the episode's counts",
                   external=True)
CLOCK = TopicSpec("/clock", "rosgraph_msgs/msg/Clock", STREAM, "control rate", "sim_bridge",
                  ("episode_recorder", "nodes with use_sim_time"),
                  "Simulation only: the simulated time of the current step (the stamps of every message)")
EPISODE_STATUS = TopicSpec("episode/status", interface("EpisodeStatus"), LATCHED, "on change", "orchestrator",
                           ("all nodes", "operator panel", "episode_recorder"),
                           "The episode: id, task, plan, clock origin, state; its result once over")

LABELS = TopicSpec("operator/labels", interface("EpisodeLabels"), LATCHED, "on every label", "operator panel",
                   ("episode_recorder",),
                   "The operator's labels of an episode (each subgoal done / not done, the episode success / "
                   "failure / partial, a note), the whole set with its revision on every change")
# The robot driver's safety state. Standard type, so a driver of another package can publish it: level
# OK (armed), WARN (disarmed: dry run) or ERROR (e-stop latched); values (key: value strings) `armed`
# and `estop` ("true"/"false"), `interventions` (safety-filter interventions so far, an integer) and
# `detail` (free text). See docs/drivers.md, "Robot safety interface".
SAFETY_STATE = TopicSpec("robot/safety_state", "diagnostic_msgs/msg/DiagnosticStatus", LATCHED, "on change",
                         "robot driver", ("operator panel", "episode_recorder"),
                         "Armed or dry run, e-stop latched, safety interventions so far (values `armed`, "
                         "`estop`, `interventions`, `detail`)", external=True)

JOINT_COMMAND = TopicSpec("robot/joint_command", "sensor_msgs/msg/JointState", STREAM, "per applied action",
                          "robot driver", ("episode_recorder",),
                          "The joint target the driver computed for each action that passed the safety filter "
                          "(sent when armed; dry run: computed only), plus the commanded `gripper_aperture`; "
                          "Franka: velocities are the waypoint velocities", external=True)

# The camera's calibrated pose, absolute as tf2 expects it, with the QoS of tf2's StaticTransformBroadcaster
# (ros2/geometry2 tf2_ros_py/tf2_ros/static_transform_broadcaster.py: depth 1, transient local, keep last).
TF_STATIC = TopicSpec("/tf_static", "tf2_msgs/msg/TFMessage", LATCHED, "once, at start", "camera (robot, from "
                      "calibration/<robot>_<camera>.yaml)", ("episode_recorder (into every bag)", "tf2 listeners"),
                      "The calibrated camera pose: the robot base frame (extrinsics parent_frame) to the optical "
                      "frame the images and depth name", external=True)
POLICY_STATUS = TopicSpec("policy/status", interface("PolicyStatus"), LATCHED, "on change (1 Hz while warming up)",
                          "policy",
                          ("orchestrator", "operator panel", "episode_recorder"),
                          "Whether the policy can act: warming up (what it waits for), ready, or server error (why); "
                          "the orchestrator starts episodes only on a ready policy. Also the current episode's "
                          "policy report (held steps, refused chunks by reason, inference latency, seam jumps, "
                          "out-of-distribution counts), final once the episode is over")

TOPICS: tuple[TopicSpec, ...] = (IMAGE, CAMERA_INFO, SENSOR_DEPTH, DEPTH, DIAGNOSTICS,
                                 JOINT_STATES, EE_POSE, PRIVILEGED, SCORE, GRIPPER_EVENTS, DECISION,
                                 CURRENT_SUBGOAL, EVENTS_TOPIC, VERIFY_REQUEST, VERIFY_RESULT, PLAN_REQUEST,
                                 PLAN_RESULT, ACTION, ACTION_TAG,
                                 EPISODE_COMMAND, EPISODE_STATUS, LABELS, SAFETY_STATE,
                                 COMMAND_REPLY, SAFETY, CLOCK, JOINT_COMMAND, TF_STATIC, POLICY_STATUS)

# Services, relative to the graph namespace: the orchestrator's (std_srvs/srv/Trigger) and the robot
# driver's safety interface (standard types, so any driver package can offer them).
STOP_SERVICE = "episode/stop"
ABORT_SERVICE = "episode/abort"
ARM_SERVICE = "robot/arm"  # std_srvs/SetBool: true arms the robot, false disarms it to dry run
ESTOP_SERVICE = "robot/estop"  # std_srvs/Trigger: stop now and latch until released
ESTOP_RELEASE_SERVICE = "robot/estop_release"  # std_srvs/Trigger: release a latched e-stop (stays disarmed)
HOME_SERVICE = "robot/home"  # std_srvs/Trigger: open the gripper and move to the home joints (armed only)
RECOVER_SERVICE = "robot/recover"  # std_srvs/Trigger: clear the arm's errors; the robot stays disarmed
SERVICES = (
    (STOP_SERVICE, "std_srvs/srv/Trigger", "orchestrator", "End the running episode (operator stop)"),
    (ABORT_SERVICE, "std_srvs/srv/Trigger", "orchestrator", "End the running episode as aborted"),
    (ARM_SERVICE, "std_srvs/srv/SetBool", "robot driver", "true: arm the robot; false: disarm it to dry run "
     "(commands are computed and recorded, nothing moves)"),
    (ESTOP_SERVICE, "std_srvs/srv/Trigger", "robot driver", "Emergency stop: hold still now; latched until "
     "released"),
    (ESTOP_RELEASE_SERVICE, "std_srvs/srv/Trigger", "robot driver", "Release a latched e-stop; the robot stays "
     "disarmed until armed again"),
    (HOME_SERVICE, "std_srvs/srv/Trigger", "robot driver", "Open the gripper and move to the home joints, through "
     "the safety filter (armed, no e-stop)"),
    (RECOVER_SERVICE, "std_srvs/srv/Trigger", "robot driver", "Clear the arm's errors (Interbotix: reboot the "
     "motors in error, torque on; franky: automatic error recovery); the robot stays disarmed"),
)


def markdown_table() -> str:
    """The topic table of docs/interfaces.md."""
    rows = ["| topic | type | QoS | rate | publisher | subscribers | what |",
            "| --- | --- | --- | --- | --- | --- | --- |"]
    for t in TOPICS:
        rows.append(f"| `{t.name}` | {t.type} | {QOS_TEXT[t.qos]} | {t.rate} | {t.publisher} | "
                    f"{', '.join(t.subscribers)} | {t.description} |")
    for name, kind, server, what in SERVICES:
        rows.append(f"| `{name}` (service) | {kind} | services | on call | {server} | operator panel / CLI | {what} |")
    return "\n".join(rows)


if __name__ == "__main__":
    print(markdown_table())
