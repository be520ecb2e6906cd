"""Depth: a tiny MoGe-2 of the real class saved in MoGe's checkpoint format, a tiny Depth Anything V2 built
from a config, the newest-frame worker, the depth node, and the simulator's true depth beside the estimate."""

import sys
import time

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="needs torch")
pytest.importorskip("moge.model.v2", reason="needs MoGe-2 (requirements/moge.txt)")

from ladder_ros.camera.model import CameraIntrinsics  # noqa: E402
from ladder_ros.depth.base import DepthBackendError, DepthEstimate, depth_error  # noqa: E402
from ladder_ros.depth.moge import MoGeDepth  # noqa: E402
from ladder_ros.depth.registry import make_estimator  # noqa: E402
from ladder_ros.depth.worker import DepthJob, DepthWorker  # noqa: E402
from tests.camera_fixtures import diagnostic_values, spin_until  # noqa: E402
from tests.depth_fixtures import save_tiny_depth_anything, save_tiny_moge  # noqa: E402


@pytest.fixture(scope="session")
def tiny_moge(tmp_path_factory):
    return save_tiny_moge(tmp_path_factory.mktemp("moge") / "model.pt")


@pytest.fixture(scope="session")
def tiny_depth_anything(tmp_path_factory):
    folder = tmp_path_factory.mktemp("depth_anything")
    save_tiny_depth_anything(folder / "metric", "metric")
    save_tiny_depth_anything(folder / "relative", "relative")
    return folder


def rgb(h=96, w=128, seed=0):
    return np.random.default_rng(seed).integers(0, 256, (h, w, 3), dtype=np.uint8)


def test_tiny_moge2_gives_metric_depth_of_the_image_size(tiny_moge):
    estimator = make_estimator("moge2", str(tiny_moge), "cpu")
    assert isinstance(estimator, MoGeDepth) and estimator.fp16 is False  # fp16 on a CPU is very slow
    intrinsics = CameraIntrinsics(256, 192, 200.0, 200.0, 127.5, 95.5)  # another resolution, same camera
    for given, source in ((intrinsics, "calibration"), (None, "estimated")):
        estimate = estimator.estimate(rgb(), given)
        assert estimate.depth.shape == (96, 128) and estimate.depth.dtype == np.float32
        assert estimate.fov_source == source and estimate.inference_s > 0
        finite = estimate.depth[np.isfinite(estimate.depth)]
        assert finite.size > 0 and np.all(finite > 0)


def test_moge_refuses_what_would_be_fake_depth(tiny_moge, tmp_path, monkeypatch):
    with pytest.raises(DepthBackendError, match="checkpoint not found.*never downloaded"):
        MoGeDepth(tmp_path / "none.pt", "cpu")
    checkpoint = torch.load(tiny_moge, weights_only=True)
    partial = dict(checkpoint["model"])
    partial.pop("scale_head.0.weight")
    torch.save({"model_config": checkpoint["model_config"], "model": partial}, tmp_path / "partial.pt")
    with pytest.raises(DepthBackendError, match="lacks 1 of the model's parameters.*random weights"):
        MoGeDepth(tmp_path / "partial.pt", "cpu")
    relative = {k: v for k, v in checkpoint["model_config"].items() if k != "scale_head"}
    torch.save({"model_config": relative, "model": checkpoint["model"]}, tmp_path / "relative.pt")
    with pytest.raises(DepthBackendError, match="no metric scale head"):
        MoGeDepth(tmp_path / "relative.pt", "cpu")
    torch.save({"state_dict": {}}, tmp_path / "other.pt")
    with pytest.raises(DepthBackendError, match="not a MoGe checkpoint"):
        MoGeDepth(tmp_path / "other.pt", "cpu")
    monkeypatch.setitem(sys.modules, "moge.model.v2", None)  # as if MoGe were not installed
    with pytest.raises(DepthBackendError, match="MoGe-2 is not installed: pip install --no-deps"):
        MoGeDepth(tiny_moge, "cpu")


def test_tiny_depth_anything_v2_gives_metric_depth_of_the_image_size(tiny_depth_anything):
    estimator = make_estimator("depth_anything_v2", str(tiny_depth_anything / "metric"), "cpu")
    estimate = estimator.estimate(rgb(90, 120), None)
    assert estimate.depth.shape == (90, 120) and estimate.depth.dtype == np.float32
    assert np.all(np.isfinite(estimate.depth)) and np.all((estimate.depth > 0) & (estimate.depth <= 20))
    with pytest.raises(DepthBackendError, match="relative Depth Anything model gives inverse depth"):
        make_estimator("depth_anything_v2", str(tiny_depth_anything / "relative"), "cpu")


class SlowEstimator:
    name, device = "slow", "cpu"

    def __init__(self):
        self.seen = []

    def estimate(self, image, intrinsics):
        self.seen.append(int(image[0, 0, 0]))
        time.sleep(0.05)
        return DepthEstimate(np.ones(image.shape[:2], np.float32), "n/a", 0.05)


def test_worker_runs_the_newest_frame_and_never_blocks_the_caller():
    estimator, results = SlowEstimator(), []
    worker = DepthWorker(estimator, results.append)
    worker.start()
    started = time.monotonic()
    for i in range(20):
        worker.submit(DepthJob(np.full((4, 4, 3), i, np.uint8), None, i, "cam"))
    submit_s = time.monotonic() - started
    deadline = time.monotonic() + 10
    while (not results or results[-1].job.stamp_ns != 19) and time.monotonic() < deadline:
        time.sleep(0.01)
    worker.stop()
    assert submit_s < 0.05 * 20 / 2  # submitting never waited for the model
    assert results[-1].job.stamp_ns == 19 and estimator.seen[-1] == 19  # the newest frame won
    stats = worker.stats()
    assert stats.submitted == 20 and stats.processed == len(results) < 20
    assert stats.processed + stats.dropped == 20


def test_depth_error_metrics():
    truth = np.full((4, 4), 2.0, np.float32)
    truth[0, 0] = np.nan
    estimate = np.full((4, 4), 2.2, np.float32)
    error = depth_error(estimate, truth)
    assert error.pixels == 15 and error.abs_rel == pytest.approx(0.1) and error.rmse_m == pytest.approx(0.2)
    assert error.delta1 == 1.0 and error.coverage == 1.0


# ------------------------------------------------------------------------------ the node
rclpy = pytest.importorskip("rclpy", reason="needs the ROS 2 wheels (requirements/ros.txt)")

from diagnostic_msgs.msg import DiagnosticArray  # noqa: E402
from rclpy.executors import SingleThreadedExecutor  # noqa: E402
from rclpy.parameter import Parameter  # noqa: E402
from sensor_msgs.msg import CameraInfo, Image  # noqa: E402

from ladder_ros.specs import topics  # noqa: E402
from ladder_ros.nodes.depth import DepthNode  # noqa: E402
from ladder_ros.runtime.endpoints import publisher, subscription  # noqa: E402
from ladder_ros.ros_conversions import (  # noqa: E402
    camera_info_to_msg, depth_from_msg, depth_to_msg, image_to_msg, stamp_to_ns)


class Camera(rclpy.node.Node):
    """Publishes what a camera (or the sim bridge) publishes, and collects the depth node's output."""

    def __init__(self, namespace):
        super().__init__("fake_camera", namespace=namespace)
        self.image_pub = publisher(self, Image, topics.IMAGE)
        self.info_pub = publisher(self, CameraInfo, topics.CAMERA_INFO)
        self.measured_pub = publisher(self, Image, topics.SENSOR_DEPTH)
        self.depths, self.diagnostics = [], []
        subscription(self, Image, topics.DEPTH, self.depths.append, depth=50)
        subscription(self, DiagnosticArray, topics.DIAGNOSTICS, self.diagnostics.append)


def run_node(namespace, params, frames, with_measured=True, estimator=None):
    node = DepthNode(node_name="depth", namespace=namespace, estimator=estimator,
                     parameter_overrides=[Parameter(k, value=v) for k, v in params.items()])
    camera = Camera(namespace)
    executor = SingleThreadedExecutor()
    for n in (node, camera):
        executor.add_node(n)
    intrinsics = CameraIntrinsics(128, 96, 100.0, 100.0, 63.5, 47.5)
    sent = []
    try:
        listened = camera.measured_pub if params["backend"] == "sensor" else camera.image_pub
        assert spin_until(executor, lambda: listened.get_subscription_count() > 0, 10)
        for i in range(frames):
            stamp = 1_000_000_000 + i * 200_000_000
            camera.info_pub.publish(camera_info_to_msg(intrinsics, stamp, "cam"))
            if with_measured:
                camera.measured_pub.publish(depth_to_msg(np.full((96, 128), 1.5, np.float32), stamp, "cam"))
            camera.image_pub.publish(image_to_msg(rgb(seed=i), stamp, "cam"))
            sent.append(stamp)
            # The next frame once this one is out, as a 5 Hz camera and a slow model would have it.
            spin_until(executor, lambda: len(camera.depths) > i, 30)
        spin_until(executor, lambda: len(camera.diagnostics) >= 1 and int(diagnostic_values(camera.diagnostics[-1])[
            "published"]) == len(camera.depths), 5)
    finally:
        node.close()
        for n in (node, camera):
            executor.remove_node(n)
            n.destroy_node()
    return node, camera, sent


@pytest.mark.ros
def test_depth_node_with_tiny_moge2_publishes_aligned_metric_depth(ros, tiny_moge):
    node, camera, sent = run_node("/moge", {"backend": "moge2", "model_path": str(tiny_moge), "device": "cpu",
                                            "compare_to_sensor": True, "diagnostics_period_s": 0.1}, frames=3)
    assert [stamp_to_ns(m.header.stamp) for m in camera.depths] == sent
    for msg in camera.depths:
        assert msg.encoding == "32FC1" and (msg.height, msg.width) == (96, 128) and msg.header.frame_id == "cam"
        assert depth_from_msg(msg).dtype == np.float32
    last = diagnostic_values(camera.diagnostics[-1])
    assert last["backend"] == "moge2" and last["device"] == "cpu" and last["fov"] == "calibration"
    assert float(last["latency_p50_ms"]) > 0 and int(last["compared_frames"]) == 3  # scored against the truth
    assert float(last["abs_rel"]) >= 0 and "rmse_m" in last


@pytest.mark.ros
def test_depth_node_with_tiny_depth_anything_and_the_sensor_backend(ros, tiny_depth_anything):
    _, camera, sent = run_node("/da", {"backend": "depth_anything_v2", "device": "cpu",
                                       "model_path": str(tiny_depth_anything / "metric")}, frames=2,
                               with_measured=False)
    assert [stamp_to_ns(m.header.stamp) for m in camera.depths] == sent
    assert diagnostic_values(camera.diagnostics[-1])["backend"] == "depth_anything_v2"
    _, camera, sent = run_node("/sensor", {"backend": "sensor"}, frames=2)
    assert [stamp_to_ns(m.header.stamp) for m in camera.depths] == sent
    assert np.all(depth_from_msg(camera.depths[0]) == np.float32(1.5))


def test_depth_node_without_weights_is_one_clear_error():
    import subprocess

    result = subprocess.run([sys.executable, "-m", "ladder_ros.nodes.depth", "--ros-args", "-p", "backend:=moge2",
                             "-p", "device:=cpu"], capture_output=True, text=True, timeout=120)
    assert result.returncode == 2
    assert "ladder_ros depth: error: MoGe-2 checkpoint not found: (empty path)" in result.stderr


# ------------------------------------------------------------------------------ simulation: true depth
def test_mujoco_true_depth_matches_the_scene_geometry():
    pytest.importorskip("mujoco")
    from ladder_ros.core.suite import load_suite
    from ladder_ros.paths import share_path
    from ladder_ros.sim import mujoco_tabletop as tabletop

    suite = load_suite(share_path("config", "suites", "tabletop.yaml"))
    sim = tabletop.MujocoTabletop(suite, render=True, image_size=64, render_depth=True)
    try:
        observation = sim.reset(suite.tasks[0], 0, 0)
    finally:
        sim.close()
    depth = observation.depth
    assert depth.shape == (64, 64) and depth.dtype == np.float32 and observation.image.shape == (64, 64, 3)
    # The optical axis meets the table top at the camera's target point (nothing stands there).
    expected = float(np.linalg.norm(tabletop.CAMERA_TARGET - tabletop.CAMERA_POSITION))
    assert np.mean(depth[31:33, 31:33]) == pytest.approx(expected, abs=0.01)
    assert np.isnan(depth).any()  # sky: nothing hit
    intrinsics = CameraIntrinsics.from_vertical_fov(tabletop.CAMERA_FOVY_DEG, 64, 64)
    assert intrinsics.fx == pytest.approx(32 / np.tan(np.radians(27.5)))


@pytest.mark.ros
def test_sim_bridge_truth_scores_the_depth_node_in_a_simulated_episode(ros, tiny_moge):
    """Item 4: the simulator's images through MoGe-2 next to the simulator's exact depth, in the graph."""
    pytest.importorskip("mujoco", reason="the built-in tabletop needs MuJoCo (requirements/core.txt)")
    from ladder_ros.bringup.client import EpisodeClient
    from ladder_ros.nodes.gripper_trigger import GripperTriggerNode
    from ladder_ros.nodes.orchestrator.node import OrchestratorNode
    from ladder_ros.nodes.policy.node import PolicyNode
    from ladder_ros.nodes.sim_bridge.node import SimBridgeNode
    from ladder_ros.nodes.vlm_verifier import VerifierNode

    ns = "simdepth"
    nodes = [SimBridgeNode(namespace=ns, parameter_overrides=[Parameter("image_size", value=64),
                                                              Parameter("publish_depth", value=True)]),
             GripperTriggerNode(namespace=ns), OrchestratorNode(namespace=ns), PolicyNode(namespace=ns),
             VerifierNode(namespace=ns),
             DepthNode(namespace=ns, parameter_overrides=[
                 Parameter("backend", value="moge2"), Parameter("model_path", value=str(tiny_moge)),
                 Parameter("device", value="cpu"), Parameter("compare_to_sensor", value=True),
                 Parameter("diagnostics_period_s", value=0.2)])]
    truth, estimates = [], []
    probe = rclpy.create_node("probe", namespace=ns)
    subscription(probe, Image, topics.SENSOR_DEPTH, truth.append, depth=500)
    subscription(probe, Image, topics.DEPTH, estimates.append, depth=500)
    client = EpisodeClient(namespace=ns)
    executor = SingleThreadedExecutor()
    for n in (*nodes, probe, client):
        executor.add_node(n)
    depth_node = nodes[-1]
    try:
        client.wait_for_graph(executor, timeout_s=30)
        outcome = client.run_episode(executor, "kitchen_single_1", variant="proprio_verifier", layout=0, seed=0,
                                     timeout_s=300)
        spin_until(executor, lambda: depth_node.comparison.frames >= 1, 120)
    finally:
        for n in (*nodes, probe, client):
            getattr(n, "close", lambda: None)()
            executor.remove_node(n)
            n.destroy_node()
    assert outcome.result is not None
    steps = outcome.result["steps_used"] + 1
    assert len(truth) == steps  # one exact depth image per observation, with the step's stamp
    assert truth[0].encoding == "32FC1" and (truth[0].height, truth[0].width) == (64, 64)
    assert {stamp_to_ns(m.header.stamp) for m in estimates} <= {stamp_to_ns(m.header.stamp) for m in truth}
    assert depth_node.comparison.frames >= 1 and depth_node.comparison.summary()["abs_rel"] >= 0
