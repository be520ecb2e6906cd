"""Camera capture: RealSense recordings through the real pyrealsense2 pipeline and through the camera node,
the capture loop's newest-frame hand-over and drop counting, video files paced at their frame rate, the
camera node on a fake camera, and the calibrated camera pose on /tf_static (read back by a late listener,
and recorded into every episode's bag)."""

import os
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import yaml

from ladder_ros.interface_conversions import document_to_msg

from ladder_ros.camera.base import CameraError, CaptureLoop, DeviceClock, EndOfStream, LatestSlot
from ladder_ros.camera.calibration_file import CameraCalibration, save_calibration
from ladder_ros.instruments.cameras.fake import FakeCamera, sequence_from_image
from ladder_ros.camera.model import CameraIntrinsics, Frame, RigidTransform, rotation_vector

rs = pytest.importorskip("pyrealsense2", reason="needs pyrealsense2 and libusb-1.0 (requirements/camera.txt)")

from ladder_ros.camera.realsense import RealSenseCamera  # noqa: E402
from tests.camera_fixtures import diagnostic_values, spin_until, write_realsense_recording  # noqa: E402


# librealsense's playback loses frames now and then (the first ones while the pipeline starts, others
# when the machine is busy), so checks compare each delivered frame with the recorded frame of the
# same frame number, and need most of them.


def delivered(got, recorded):
    """Indices into ``recorded`` of the frame numbers ``got``, which must be in order and most of them."""
    assert got == sorted(got) and set(got) <= set(recorded) and len(got) >= len(recorded) // 2, (got, recorded)
    return [recorded.index(n) for n in got]


@pytest.fixture(scope="module")
def recording(tmp_path_factory):
    return write_realsense_recording(tmp_path_factory.mktemp("rs") / "session.db3", frames=10, skip=(4, 5))


@pytest.fixture(scope="module")
def long_recording(tmp_path_factory):
    """Two seconds at 30 Hz: long enough for a subscriber to connect while it plays."""
    return write_realsense_recording(tmp_path_factory.mktemp("rs") / "long.db3", frames=60, skip=(30, 31))


def read_all(camera, limit=50):
    frames = []
    camera.open()
    try:
        for _ in range(limit):
            try:
                frame = camera.read(2.0)
            except EndOfStream:
                break
            if frame is not None:
                frames.append(frame)
    finally:
        camera.close()
    return frames


def test_recording_plays_back_through_the_pyrealsense2_pipeline(recording):
    camera = RealSenseCamera(recording=str(recording.path))
    intrinsics = camera.open()
    camera.close()
    assert intrinsics == recording.color_intrinsics  # the colour stream's intrinsics, intact
    assert camera.serial == recording.serial and camera.depth_scale == pytest.approx(recording.depth_units)
    frames = read_all(RealSenseCamera(recording=str(recording.path), real_time=False))
    for frame, i in zip(frames, delivered([f.sequence for f in frames], recording.frame_numbers)):
        rgb, depth_mm = recording.colors[i], recording.depths_mm[i]
        assert frame.stamp_ns == int(round(recording.stamps_ms[i] * 1e6))  # the device's stamp, to the ns
        assert frame.color.dtype == np.uint8 and frame.color.shape == rgb.shape
        np.testing.assert_array_equal(frame.color, rgb)
        assert frame.depth.dtype == np.float32 and frame.depth.shape == rgb.shape[:2]
        # Aligned to colour: the depth image (focal 48 px) is reprojected into the colour camera (56 px,
        # 15 mm to the side). Depth varies by row only, so colour row v shows depth row
        # cy + (v - cy) * 48 / 56; columns at the border have no depth.
        d_intr, c_intr = recording.depth_intrinsics, recording.color_intrinsics
        rows = c_intr.cy + (np.arange(48) - c_intr.cy) * d_intr.fy / c_intr.fy
        expected = np.interp(rows, np.arange(48), depth_mm[:, 32].astype(np.float64) / 1000.0)
        inner = frame.depth[2:-2, 6:-6]
        # rs.align splats each depth pixel onto whole colour pixels: within one depth row (4 mm).
        want = np.repeat(expected[2:-2, None], inner.shape[1], axis=1)
        valid = np.isfinite(inner)
        np.testing.assert_allclose(inner[valid], want[valid], atol=0.0045)
        # The patch without a return (depth rows 20-22, columns 40-42) is NaN where it lands in colour.
        rows_nan, cols_nan = np.nonzero(np.isnan(frame.depth))
        assert len(rows_nan) >= 4 and rows_nan.min() >= 18 and rows_nan.max() <= 26
        assert cols_nan.min() >= 38 and cols_nan.max() <= 50
        unaligned = np.repeat(depth_mm[2:-2, 32:33] / 1000.0, inner.shape[1], axis=1)
        assert np.nanmax(np.abs(inner - unaligned)) > 0.008  # alignment really moved the depth


def test_bgr_recordings_are_converted_to_rgb(tmp_path):
    rec = write_realsense_recording(tmp_path / "bgr.db3", frames=4, color_format="bgr8")
    frames = read_all(RealSenseCamera(recording=str(rec.path), depth=False, real_time=False))
    assert frames and frames[-1].depth is None
    np.testing.assert_array_equal(frames[-1].color, rec.colors[frames[-1].sequence])


def test_realsense_errors_are_clear(tmp_path):
    from ladder_ros.core.errors import ConfigError

    with pytest.raises(ConfigError, match="recording not found"):
        RealSenseCamera(recording=str(tmp_path / "none.db3"))
    with pytest.raises(ConfigError, match="either a RealSense serial number or a recording"):
        RealSenseCamera(serial="1", recording="x")
    with pytest.raises(CameraError, match="no RealSense camera with serial '999'"):
        RealSenseCamera(serial="999").open()


def test_capture_loop_counts_device_gaps_and_keeps_the_newest(recording):
    camera = RealSenseCamera(recording=str(recording.path), real_time=False)
    read, sequences = camera.read, []

    def reading(timeout_s):
        frame = read(timeout_s)
        if frame is not None:
            sequences.append(frame.sequence)
        return frame

    camera.read = reading
    loop = CaptureLoop(camera, retry_s=0.05)
    loop.start()
    deadline = time.monotonic() + 30
    while not loop.snapshot().ended and time.monotonic() < deadline:
        time.sleep(0.02)
    loop.stop()
    stats = loop.snapshot()
    delivered(sequences, recording.frame_numbers)
    assert stats.ended and stats.frames == len(sequences)
    # Frames 4 and 5 were never recorded (the device dropped them): counted, with any playback lost.
    assert stats.device_gaps == sequences[-1] - sequences[0] + 1 - len(sequences)
    assert stats.device_gaps >= 2 or not (sequences[0] < 4 and sequences[-1] > 5)
    assert stats.overwritten == stats.frames - 1  # nobody took frames: all but the newest were replaced
    assert loop.slot.take().sequence == sequences[-1]


class FlakyCamera:
    """Fails to open twice, then streams frames 0, 1, 2, 5 and ends."""

    name = "flaky"

    def __init__(self):
        self.opens = 0
        self.sequence = iter([0, 1, 2, 5])

    def open(self):
        self.opens += 1
        if self.opens <= 2:
            raise CameraError("not plugged in")
        return None

    def read(self, timeout_s):
        seq = next(self.sequence, None)
        if seq is None:
            raise EndOfStream("done")
        return Frame(np.zeros((2, 2, 3), np.uint8), stamp_ns=seq, sequence=seq, received_monotonic=time.monotonic())

    def close(self):
        pass


def test_capture_loop_retries_a_missing_camera():
    camera = FlakyCamera()
    opened = []
    loop = CaptureLoop(camera, on_open=opened.append, retry_s=0.01)
    loop.start()
    deadline = time.monotonic() + 10
    while not loop.snapshot().ended and time.monotonic() < deadline:
        time.sleep(0.01)
    stats = loop.snapshot()
    assert camera.opens == 3 and opened == [None]
    assert stats.errors == 2 and stats.last_error == "not plugged in"
    assert stats.frames == 4 and stats.device_gaps == 2


def test_latest_slot_and_device_clock():
    slot = LatestSlot()
    assert slot.put(1) is False and slot.put(2) is True and slot.overwritten == 1
    assert slot.take() == 2 and slot.take() is None
    clock = DeviceClock()
    # Device clock 5 s behind the host; the second frame arrives with less transport delay.
    assert clock.to_host_ns(1_000_000, 5_001_000_000 + 3_000_000) == 5_004_000_000
    assert clock.to_host_ns(34_000_000, 5_034_000_000 + 1_000_000) == 5_035_000_000
    assert clock.offset_ns == 5_001_000_000


def test_frames_intrinsics_and_transforms_validate():
    from ladder_ros.core.errors import ConfigError, InvalidInputError

    with pytest.raises(InvalidInputError, match="uint8 RGB"):
        Frame(np.zeros((2, 2), np.uint8), 0, 0, 0.0)
    with pytest.raises(InvalidInputError, match="float32 metres"):
        Frame(np.zeros((2, 2, 3), np.uint8), 0, 0, 0.0, depth=np.zeros((2, 2)))
    with pytest.raises(ConfigError, match="focal lengths must be positive"):
        CameraIntrinsics(10, 10, 0, 1, 5, 5)
    with pytest.raises(ConfigError, match="takes 4 coefficients"):
        CameraIntrinsics(10, 10, 1, 1, 5, 5, "equidistant", (0.0,) * 5)
    intr = CameraIntrinsics(640, 480, 500, 500, 319.5, 239.5)
    half = intr.scaled(320, 240)
    assert (half.fx, half.cx, half.cy) == (250, 159.5, 119.5)
    assert intr.horizontal_fov_deg == pytest.approx(2 * np.degrees(np.arctan(640 / 1000)))
    rng = np.random.default_rng(0)
    for angle in (0.0, 0.3, 2.0, np.pi - 1e-9):
        axis = rng.normal(size=3)
        rvec = axis / np.linalg.norm(axis) * angle
        T = RigidTransform.from_rvec(rvec, rng.normal(size=3))
        back = RigidTransform.from_rvec(rotation_vector(T.R), T.t)
        assert T.distance_to(back)[1] < 1e-5  # degrees (acos loses digits near 0)
        assert RigidTransform.from_quaternion(T.t, T.quaternion_xyzw).distance_to(T)[1] < 1e-5
        assert (T @ T.inverse()).distance_to(RigidTransform()) < (1e-9, 1e-5)


class FakeClock:
    """A monotonic clock that moves only when the camera sleeps: pacing is checked without waiting."""

    def __init__(self):
        self.now = 100.0
        self.slept = []

    def __call__(self):
        return self.now

    def sleep(self, seconds):
        self.slept.append(seconds)
        self.now += seconds


def write_video(path, frames=5, fps=10.0):
    import cv2

    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"MJPG"), fps, (32, 24))
    assert writer.isOpened(), "OpenCV cannot write MJPG here"
    for i in range(frames):
        writer.write(np.full((24, 32, 3), 40 * i + 20, np.uint8))
    writer.release()
    return path


def play(camera, clock, count):
    """(delivery time on the fake clock, frame) of the first ``count`` frames, or until the file ends."""
    out = []
    camera.open()
    try:
        while len(out) < count:
            try:
                frame = camera.read(1.0)
            except EndOfStream:
                break
            if frame is not None:
                out.append((clock(), frame))
    finally:
        camera.close()
    return out


def test_a_video_file_plays_at_its_frame_rate_or_a_given_one_and_can_loop(tmp_path):
    from ladder_ros.camera.opencv_camera import OpenCVCamera

    video = write_video(tmp_path / "ten_fps.avi")
    clock = FakeClock()
    frames = play(OpenCVCamera(str(video), clock=clock, sleep=clock.sleep), clock, 10)
    assert [f.sequence for _, f in frames] == [0, 1, 2, 3, 4]  # then the file ended
    np.testing.assert_allclose(np.diff([when for when, _ in frames]), 0.1, atol=1e-9)  # the file's 10 fps
    clock = FakeClock()
    frames = play(OpenCVCamera(str(video), fps=25.0, clock=clock, sleep=clock.sleep), clock, 10)
    np.testing.assert_allclose(np.diff([when for when, _ in frames]), 0.04, atol=1e-9)  # the rate given
    clock = FakeClock()
    frames = play(OpenCVCamera(str(video), real_time=False, clock=clock, sleep=clock.sleep), clock, 10)
    assert len(frames) == 5 and clock.slept == []  # as fast as it decodes
    clock = FakeClock()
    frames = play(OpenCVCamera(str(video), loop=True, clock=clock, sleep=clock.sleep), clock, 12)
    assert [f.sequence for _, f in frames] == list(range(12))  # the frame counter keeps counting
    first, sixth = frames[0][1].color, frames[5][1].color
    assert abs(int(first.mean()) - 20) <= 3 and abs(int(sixth.mean()) - int(first.mean())) <= 1  # from the start
    np.testing.assert_allclose(np.diff([when for when, _ in frames]), 0.1, atol=1e-9)
    # A reader that fell behind gets frames at once until it is back on the schedule (which never lags
    # more than one period), then the pace again.
    clock = FakeClock()
    camera = OpenCVCamera(str(video), clock=clock, sleep=clock.sleep)
    camera.open()
    camera.read(1.0)
    clock.now += 0.35  # busy for 3.5 frame periods
    late = [camera.read(1.0) for _ in range(4)]
    camera.close()
    assert [f.sequence for f in late] == [1, 2, 3, 4] and clock.slept == [pytest.approx(0.1)]


# ------------------------------------------------------------------------------ the node
rclpy = pytest.importorskip("rclpy", reason="needs the ROS 2 wheels (requirements/ros.txt)")

from diagnostic_msgs.msg import DiagnosticArray  # noqa: E402
from rclpy.executors import SingleThreadedExecutor  # noqa: E402
from rclpy.parameter import Parameter  # noqa: E402
from sensor_msgs.msg import CameraInfo, Image  # noqa: E402

from ladder_ros.specs import topics  # noqa: E402
from ladder_ros.nodes.camera import CameraNode  # noqa: E402
from ladder_ros.runtime.endpoints import message_class, subscription  # noqa: E402
from ladder_ros.ros_conversions import depth_from_msg, image_from_msg, stamp_to_ns  # noqa: E402


class Probe(rclpy.node.Node):
    """Collects what a graph's camera publishes, as the policy, verifier and depth node would get it."""

    def __init__(self, namespace):
        super().__init__("probe", namespace=namespace)
        self.images, self.infos, self.depths, self.diagnostics = [], [], [], []
        subscription(self, Image, topics.IMAGE, self.images.append, depth=50)
        subscription(self, CameraInfo, topics.CAMERA_INFO, self.infos.append, depth=50)
        subscription(self, Image, topics.SENSOR_DEPTH, self.depths.append, depth=50)
        subscription(self, DiagnosticArray, topics.DIAGNOSTICS, self.diagnostics.append)


@pytest.mark.ros
def test_camera_node_publishes_a_recording_like_the_sim_bridge(ros, long_recording, tmp_path):
    recording = long_recording
    calibration_file = save_calibration(CameraCalibration("test_main", recording.color_intrinsics),
                                        tmp_path / "test_main.yaml")
    node = CameraNode(node_name="camera", namespace="/rs", parameter_overrides=[
        Parameter("backend", value="realsense"), Parameter("recording", value=str(recording.path)),
        Parameter("realtime_playback", value=True), Parameter("calibration_file", value=str(calibration_file)),
        Parameter("diagnostics_period_s", value=0.2)])
    probe = Probe("/rs")
    executor = SingleThreadedExecutor()
    for n in (node, probe):
        executor.add_node(n)
    try:
        # Played at the recorded 30 Hz and published at once, every frame arrives (none overwritten).
        assert spin_until(executor, lambda: node.capture.snapshot().ended and len(probe.images) >= 2
                          and len(probe.depths) >= 2, 30)
        spin_until(executor, lambda: len(probe.images) == len(probe.depths) == len(probe.infos) == node.published, 3)
        spin_until(executor, lambda: any(int(diagnostic_values(d)["frames"]) == node.capture.snapshot().frames
                                         for d in probe.diagnostics), 5)
    finally:
        node.close()
        for n in (node, probe):
            executor.remove_node(n)
            n.destroy_node()
    recorded = zip(recording.stamps_ms, recording.colors, recording.depths_mm)
    expected = {int(round(ms * 1e6)): (rgb, mm) for ms, rgb, mm in recorded}
    stamps = [stamp_to_ns(m.header.stamp) for m in probe.images]
    assert stamps == sorted(stamps) and set(stamps) <= {int(round(ms * 1e6)) for ms in recording.stamps_ms}
    for msg in probe.images:
        assert msg.encoding == "rgb8" and msg.header.frame_id == "camera_color_optical_frame"
        np.testing.assert_array_equal(image_from_msg(msg), expected[stamp_to_ns(msg.header.stamp)][0])
    assert {stamp_to_ns(m.header.stamp) for m in probe.infos} <= set(stamps)
    info = probe.infos[0]
    assert list(info.k) == pytest.approx(list(recording.color_intrinsics.K.ravel()))
    assert (info.width, info.height, info.distortion_model) == (64, 48, "plumb_bob")
    depth = depth_from_msg(probe.depths[0])
    assert probe.depths[0].encoding == "32FC1" and depth.shape == (48, 64)
    mm = expected[stamp_to_ns(probe.depths[0].header.stamp)][1]
    assert np.nanmedian(depth) == pytest.approx(np.median(mm) / 1000.0, abs=2e-3)
    last = diagnostic_values(probe.diagnostics[-1])
    assert int(last["device_gaps"]) == node.capture.snapshot().device_gaps
    assert int(last["published"]) == node.published and int(last["frames"]) == node.capture.snapshot().frames
    assert last["camera_info"] == "calibration" and last["backend"] == "realsense"


@pytest.mark.ros
def test_camera_node_on_a_fake_camera_publishes_the_newest_frames(ros):
    node = CameraNode(node_name="camera", namespace="/fake", backend=FakeCamera(64, 48, fps=60.0, frames=40),
                      parameter_overrides=[Parameter("backend", value="fake"),
                                           Parameter("diagnostics_period_s", value=0.2)])
    probe = Probe("/fake")
    executor = SingleThreadedExecutor()
    for n in (node, probe):
        executor.add_node(n)
    try:
        assert spin_until(executor, lambda: probe.images and probe.infos and sequence_from_image(
            image_from_msg(probe.images[-1])) == 39 and probe.infos[-1].header.stamp == probe.images[-1].header.stamp,
            30)
        spin_until(executor, lambda: len(probe.diagnostics) >= 2, 5)
    finally:
        node.close()
        for n in (node, probe):
            executor.remove_node(n)
            n.destroy_node()
    sequences = [sequence_from_image(image_from_msg(m)) for m in probe.images]
    assert sequences == sorted(sequences) and len(sequences) >= 10  # in order, ending with the newest (39)
    stats = node.capture.snapshot()
    assert node.published + stats.overwritten == stats.frames == 40
    # The fake camera reports intrinsics, as a RealSense does: each image has its camera_info.
    assert {stamp_to_ns(m.header.stamp) for m in probe.infos} <= {stamp_to_ns(m.header.stamp) for m in probe.images}
    assert diagnostic_values(probe.diagnostics[-1])["camera_info"] == "device"


# ------------------------------------------------------------------------------ the camera in the robot's TF tree
CAMERA_POSE = RigidTransform.from_quaternion([0.35, -0.75, 0.55], [-0.8, 0.1, -0.05, 0.58])  # an eye-to-hand pose


def calibrated(tmp_path, parent="wx250s/base_link", child="camera_color_optical_frame"):
    from ladder_ros.camera.calibration_file import Extrinsics

    intrinsics = CameraIntrinsics(64, 48, 56.0, 56.0, 31.5, 23.5)
    return save_calibration(CameraCalibration("widowx_main", intrinsics, extrinsics=Extrinsics(
        parent, child, CAMERA_POSE, RigidTransform(), views=10, noise_position_m=0.001, noise_rotation_deg=0.2)),
        tmp_path / "widowx_main.yaml")


def tf_static_qos():
    from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile

    # What a tf2 listener asks for (tf2_ros TransformListener's static QoS): transient local, so a
    # listener that joins after the camera started still gets the pose.
    return QoSProfile(depth=100, history=HistoryPolicy.KEEP_LAST, durability=DurabilityPolicy.TRANSIENT_LOCAL)


@pytest.mark.ros
def test_the_calibrated_camera_pose_is_on_tf_static_and_the_images_name_its_frame(ros, tmp_path):
    tf2_msgs = pytest.importorskip("tf2_msgs.msg", reason="needs tf2_msgs (scripts/setup.sh builds it from "
                                   "../shared/vendor/ros2_interfaces; a ROS install has it)")
    from ladder_ros.ros_conversions import transform_from_msg

    path = calibrated(tmp_path)
    node = CameraNode(node_name="camera", namespace="/tf", backend=FakeCamera(64, 48, fps=30.0, frames=20),
                      parameter_overrides=[Parameter("backend", value="fake"),
                                           Parameter("calibration_file", value=str(path)),
                                           Parameter("base_frame", value="wx250s/base_link")])
    executor = SingleThreadedExecutor()
    executor.add_node(node)
    # The listener joins after the camera published its pose once: transient local brings it.
    for _ in range(5):
        executor.spin_once(timeout_sec=0.02)
    probe = Probe("/tf")
    poses = []
    probe.create_subscription(tf2_msgs.TFMessage, "/tf_static", poses.append, tf_static_qos())
    executor.add_node(probe)
    try:
        assert spin_until(executor, lambda: poses and probe.images, 30), "waited for /tf_static and an image"
    finally:
        node.close()
        for n in (node, probe):
            executor.remove_node(n)
            n.destroy_node()
    assert len(poses) == 1 and len(poses[0].transforms) == 1
    message = poses[0].transforms[0]
    transform, parent, child = transform_from_msg(message)
    assert (parent, child) == ("wx250s/base_link", "camera_color_optical_frame")
    # Back to 1e-9 against the numbers in the calibration file.
    stored = yaml.safe_load(path.read_text())["extrinsics"]
    got = [message.transform.translation.x, message.transform.translation.y, message.transform.translation.z]
    np.testing.assert_allclose(got, stored["translation"], atol=1e-9, rtol=0)
    rotation = message.transform.rotation
    np.testing.assert_allclose([rotation.x, rotation.y, rotation.z, rotation.w], stored["rotation"], atol=1e-9, rtol=0)
    assert transform.distance_to(CAMERA_POSE)[0] < 1e-9 and np.allclose(transform.R, CAMERA_POSE.R, atol=1e-9)
    # The images (and so the depth made from them) name the frame the transform connects to the base.
    assert {m.header.frame_id for m in probe.images} == {child}
    assert node.diagnostics()[2]["tf_static"] == "wx250s/base_link -> camera_color_optical_frame"


@pytest.mark.ros
def test_frames_that_do_not_chain_to_the_robot_are_refused_at_start(ros, tmp_path):
    from ladder_ros.core.errors import ConfigError

    path = calibrated(tmp_path, parent="base_link")
    cases = [([Parameter("frame_id", value="camera_link")], "frame_id is 'camera_link' but the calibration's "
              "extrinsics place 'camera_color_optical_frame'"),
             ([Parameter("base_frame", value="wx250s/base_link")], "base_frame is 'wx250s/base_link' but the "
              "calibration's extrinsics are in 'base_link'")]
    for overrides, message in cases:
        with pytest.raises(ConfigError, match=message):
            CameraNode(node_name="camera", namespace="/bad", backend=FakeCamera(64, 48, frames=1),
                       parameter_overrides=[Parameter("backend", value="fake"),
                                            Parameter("calibration_file", value=str(path)), *overrides])


@pytest.mark.ros
def test_every_episode_bag_carries_the_camera_pose(ros, tmp_path):
    pytest.importorskip("tf2_msgs.msg", reason="needs tf2_msgs (scripts/setup.sh)")

    from ladder_ros.messages import EpisodeStatus
    from ladder_ros.nodes.episode_recorder.node import EpisodeRecorderNode
    from ladder_ros.runtime.endpoints import publisher
    from ladder_ros.recording.bag import read_bag

    node = CameraNode(node_name="camera", namespace="/rec", backend=FakeCamera(64, 48, fps=10.0, frames=5),
                      parameter_overrides=[Parameter("backend", value="fake"),
                                           Parameter("calibration_file", value=str(calibrated(tmp_path)))])
    recorder = EpisodeRecorderNode(namespace="/rec", parameter_overrides=[
        Parameter("output_dir", value=str(tmp_path / "bags")), Parameter("close_grace_s", value=0.1)])
    orchestrator = rclpy.create_node("orchestrator", namespace="/rec")
    status = publisher(orchestrator, message_class(topics.EPISODE_STATUS), topics.EPISODE_STATUS)
    executor = SingleThreadedExecutor()
    for n in (node, recorder, orchestrator):
        executor.add_node(n)
    try:
        assert spin_until(executor, lambda: recorder.graph_state.count > 0, 30), \
            "waited for the recorder to receive /tf_static"
        for episode in ("e1", "e2"):
            status.publish(document_to_msg(EpisodeStatus(episode_id=episode, state="running")))
            assert spin_until(executor, lambda: recorder.episode_id == episode and recorder.bag is not None, 30), \
                f"waited for the recorder to open {episode}'s bag"
            status.publish(document_to_msg(EpisodeStatus(episode_id=episode, state="finished",
                                                         finish_reason="success")))
            assert spin_until(executor, lambda: len(recorder.closed) == int(episode[1]), 30), \
                f"waited for {episode}'s bag to close"
    finally:
        node.close()
        recorder.close()
        for n in (node, recorder, orchestrator):
            executor.remove_node(n)
            n.destroy_node()
    for folder in recorder.closed:
        summary, decoded = read_bag(folder, decode_topics=["/tf_static"])
        assert summary.topics.get("/tf_static") == 1, (folder, summary.topics)
        pose = decoded["/tf_static"][0].transforms[0]
        assert (pose.header.frame_id, pose.child_frame_id) == ("wx250s/base_link", "camera_color_optical_frame")
        assert abs(pose.transform.translation.y - CAMERA_POSE.t[1]) < 1e-12


@pytest.mark.ros
def test_without_tf2_msgs_the_camera_says_so_and_streams_on(ros, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "tf2_msgs.msg", None)  # what a venv without tf2_msgs gives: ImportError
    node = CameraNode(node_name="camera", namespace="/notf", backend=FakeCamera(64, 48, fps=30.0, frames=10),
                      parameter_overrides=[Parameter("backend", value="fake"),
                                           Parameter("calibration_file", value=str(calibrated(tmp_path)))])
    probe = Probe("/notf")
    executor = SingleThreadedExecutor()
    for n in (node, probe):
        executor.add_node(n)
    try:
        assert spin_until(executor, lambda: len(probe.images) >= 2, 30), "waited for images"
    finally:
        node.close()
        for n in (node, probe):
            executor.remove_node(n)
            n.destroy_node()
    assert node.camera_pose is None and "not published: tf2_msgs is unavailable" in node.camera_pose_note
    assert node.diagnostics()[2]["tf_static"] == node.camera_pose_note


def test_processes_the_project_starts_find_the_interface_libraries():
    """tf2_msgs built into the venv keeps its typesupport libraries in <venv>/lib, loaded by bare name through
    the loader's path at process start: every environment the project starts processes with has it."""
    from ladder_ros.bringup.launch_description import localhost_environment
    from ladder_ros.ros_env import network_safe_environment, ros_library_dirs

    dirs = ros_library_dirs()
    if sys.prefix == sys.base_prefix:
        assert dirs == []  # a ROS install: sourcing its setup.bash sets the path
        return
    assert dirs == [str(Path(sys.prefix) / "lib")]
    env = network_safe_environment({"LD_LIBRARY_PATH": "/opt/other", "PATH": "/bin"})
    assert env["LD_LIBRARY_PATH"] == os.pathsep.join([*dirs, "/opt/other"])
    assert network_safe_environment(env)["LD_LIBRARY_PATH"] == env["LD_LIBRARY_PATH"]  # once
    assert localhost_environment({"PATH": "/bin"})["LD_LIBRARY_PATH"] == dirs[0]  # what ros2 launch sets
    assert dirs[0] in os.environ.get("LD_LIBRARY_PATH", "").split(os.pathsep)  # this test process
