"""The twin's frame channel: the newest frame with its stamp and number, from one process to another, never torn.

The writer and the reader run in this process (threads) and, once, in two processes, as the twin and
the camera node do. Every wait is for a frame and bounded.
"""

import multiprocessing
import os
import threading
import time

import numpy as np
import pytest

from ladder_ros.camera.base import CameraError, CaptureLoop
from ladder_ros.camera.model import CameraIntrinsics
from ladder_ros.camera.registry import make_camera
from ladder_ros.instruments.cameras.shared_frame import (ChannelError, FrameReader, FrameWriter, channel_path,
                                                         default_channel)
from ladder_ros.instruments.cameras.twin import TwinCamera
from ladder_ros.core.errors import ConfigError

INTRINSICS = CameraIntrinsics(width=32, height=24, fx=30.0, fy=30.0, cx=15.5, cy=11.5)


@pytest.fixture
def channel(tmp_path):
    name = f"ladder_frames_test_{os.getpid()}_{time.monotonic_ns()}"
    yield name
    channel_path(name).unlink(missing_ok=True)


def frame(value: int) -> np.ndarray:
    return np.full((24, 32, 3), value % 256, dtype=np.uint8)


def test_the_reader_gets_the_newest_frame_its_stamp_and_number(channel):
    writer = FrameWriter(channel, INTRINSICS, fps=50.0, depth=True)
    reader = FrameReader(channel)
    try:
        assert reader.open() == INTRINSICS and reader.fps == 50.0 and reader.has_depth
        assert reader.read(0.05) is None  # nothing written yet
        depth = np.full((24, 32), 0.75, dtype=np.float32)
        depth[0, 0] = np.nan
        writer.write(frame(1), 111, depth)
        writer.write(frame(2), 222, depth)  # the first was never read: only the newest is there
        got = reader.read(1.0)
        assert got.sequence == 1 and got.stamp_ns == 222 and np.all(got.color == 2)
        assert np.isnan(got.depth[0, 0]) and got.depth[1, 1] == np.float32(0.75)
        assert reader.read(0.05) is None  # no frame newer than the one read
        got.color[...] = 9  # a copy: the channel is untouched
        writer.write(frame(3), 333, depth)
        assert np.all(reader.read(1.0).color == 3)
        with pytest.raises(ConfigError, match="carries 32x24 RGB uint8 frames"):
            writer.write(np.zeros((10, 10, 3), np.uint8), 1, depth)
    finally:
        reader.close()
        writer.close()
    assert not channel_path(channel).exists()


def test_a_frame_is_never_torn_while_the_writer_writes_the_next(channel):
    writer = FrameWriter(channel, INTRINSICS, fps=1000.0)
    reader = FrameReader(channel)
    reader.open()
    stop = threading.Event()

    def write():
        n = 0
        while not stop.is_set():
            n += 1
            writer.write(frame(n), n, None)

    thread = threading.Thread(target=write)
    thread.start()
    try:
        seen = 0
        deadline = time.monotonic() + 30
        while seen < 300:
            assert time.monotonic() < deadline, "timed out waiting for frames"
            got = reader.read(1.0)
            if got is None:
                continue
            seen += 1
            assert np.all(got.color == got.color[0, 0, 0])  # one frame's pixels, never two frames mixed
            assert int(got.color[0, 0, 0]) == got.stamp_ns % 256
    finally:
        stop.set()
        thread.join()
        reader.close()
        writer.close()


def _write_frames(name: str, count: int, ready) -> None:
    writer = FrameWriter(name, INTRINSICS, fps=100.0)
    ready.set()
    for n in range(count):
        writer.write(frame(n), 1000 + n, None)
        time.sleep(0.01)
    time.sleep(0.5)
    writer.close()


def test_another_process_writes_and_the_camera_backend_reads_until_the_writer_goes(channel):
    ready = multiprocessing.get_context("spawn").Event()
    process = multiprocessing.get_context("spawn").Process(target=_write_frames, args=(channel, 200, ready))
    process.start()
    try:
        assert ready.wait(60), "the writer process never started"
        camera = TwinCamera(channel, width=32, height=24)
        assert camera.open() == INTRINSICS
        stamps = []
        with pytest.raises(CameraError, match="removed|gone|new writer"):
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                got = camera.read(1.0)
                if got is not None:
                    stamps.append(got.stamp_ns)
        assert stamps and stamps == sorted(stamps) and len(set(stamps)) == len(stamps)
        camera.close()
    finally:
        process.join(30)


def test_the_camera_backend_names_a_missing_channel_and_a_size_it_does_not_render(channel):
    assert default_channel("/widowx", "main", "42") == "ladder_frames_42_widowx_main"
    camera = make_camera({"backend": "twin", "twin_channel": channel, "width": 640, "height": 480})
    with pytest.raises(CameraError, match="is its writer \\(the twin\\) running"):
        camera.open()
    writer = FrameWriter(channel, INTRINSICS, fps=15.0)
    try:
        with pytest.raises(CameraError, match="the twin renders 32x24 frames .* asked for 640x480"):
            camera.open()
        loop = CaptureLoop(make_camera({"backend": "twin", "twin_channel": channel}), retry_s=0.05)
        loop.start()
        writer.write(frame(5), 5, None)
        deadline = time.monotonic() + 30
        while loop.slot.take() is None:
            assert time.monotonic() < deadline, "the capture loop never got the twin's frame"
            writer.write(frame(5), time.time_ns(), None)
            time.sleep(0.05)
        loop.stop()
    finally:
        writer.close()
    with pytest.raises(ConfigError, match="a frame channel name is a plain file name"):
        FrameReader("../escape")
    with pytest.raises(ChannelError, match="not open"):
        FrameReader(channel).read(0.1)
