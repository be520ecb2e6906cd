"""Parameter specs of the instruments' nodes: the WidowX twin, franky-sim's node and the rehearsal server.

The graph's bringup checks these like the product's (:mod:`ladder_ros.specs.parameters`); the product's table
does not hold them, so nothing in the product knows an instrument's parameters.
"""

from __future__ import annotations

from ladder_ros.instruments.expert.noise import NOISE_PRESETS
from ladder_ros.robots.franka import READY_JOINTS as FRANKA_READY
from ladder_ros.robots.wx250s import SLEEP_JOINTS as WX250S_SLEEP
from ladder_ros.specs.param_spec import BOOL, COMMON, FLOAT, FLOAT_LIST, INT, STR, ParamSpec

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
              "colour stream; 256x256 renders in about 7 ms on two CPU cores (docs/rehearsal.md)", min=16,
              max=2048),
    ParamSpec("camera_height", INT, 256, "Height of the rendered camera image (px)", min=16, max=2048),
    ParamSpec("camera_fps", FLOAT, 15.0, "Rendering rate of the twin's camera on the wall clock (Hz); a frame due "
              "while the previous one renders is skipped (counted)", min=1.0, max=60.0),
    ParamSpec("render_depth", BOOL, False, "Also render the camera's exact depth (m), which the camera node "
              "publishes as the sensor's aligned depth (a second render pass per frame)"),
    ParamSpec("camera_name", STR, "main", "The camera node's camera_name: the frame channel is named after it, the "
              "ROS domain and the namespace (ladder_ros/instruments/cameras/shared_frame.py)"),
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
    ParamSpec("loop_nice", INT, 0, "Niceness of franky-sim's 1 kHz loop thread; 0: the process's. A negative one "
              "(-10) keeps the simulated arm on the wall clock on a busy machine, as the real one is on its own "
              "computer, but takes that CPU from the graph's nodes (where the system refuses it, the loop runs "
              "at the process's and diagnostics say so)", min=-20, max=19),
)

REHEARSAL_SERVER = COMMON + (
    ParamSpec("policy", STR, "bridge_pi0_server", "The policy config the policy node runs (a name under policies/ or "
              "a path): the server listens at its server.host/port (127.0.0.1 only) and answers in its chunk "
              "length, action and state conventions"),
    ParamSpec("inference_delay_ms", FLOAT, 80.0, "Time each inference takes (ms) before the chunk is sent, as a "
              "GPU server's would (the rehearsal's 80, 150, 400, 800); the median of a heavy_tail latency",
              min=0.0, max=10000.0),
    ParamSpec("latency_model", STR, "normal", "How the inference time varies "
              "(ladder_ros/instruments/rehearsal/server.py InferenceLatency): fixed (inference_delay_ms exactly), "
              "normal (sd jitter_ms), heavy_tail (lognormal around inference_delay_ms with 5 % spikes of 2-3x, as a "
              "server over a network)",
              choices=("fixed", "normal", "heavy_tail")),
    ParamSpec("jitter_ms", FLOAT, 15.0, "Standard deviation of the inference time (ms; latency_model normal, never "
              "below 0)", min=0.0, max=10000.0),
    ParamSpec("noise", STR, "bridge_like", "The scripted expert's execution noise preset "
              "(ladder_ros/instruments/expert/noise.py): off, bridge_like (as in simulation) or clumsy (a clearly "
              "worse policy, the weaker arm of a rehearsed blind A/B session)", choices=tuple(NOISE_PRESETS)),
    ParamSpec("privileged_wait_s", FLOAT, 2.0, "A request that comes before the twin's privileged state of the "
              "current episode waits this long for it (s), then is answered with a hold chunk", min=0.0,
              max=60.0),
    ParamSpec("gripper_pressure", FLOAT, 0.5, "The driver's gripper_pressure: how fast the twin's fingers close "
              "(1.2 s a stroke at 0.5), which the expert waits for before lifting and before a grasp descent, as "
              "a policy trained on the arm does", min=0.0, max=1.0),
)


INSTRUMENT_NODE_PARAMETERS: dict[str, tuple[ParamSpec, ...]] = {
    "widowx_twin": WIDOWX_TWIN,
    "rehearsal_server": REHEARSAL_SERVER,
    "franka_twin": FRANKA_TWIN,
}
