"""The twin's xs_sdk over ROS: :class:`RemoteXsSdk` against :class:`XsSdkRosServer`, and the twin's API on top.

Both ends run in this process on the loopback-only network (each with its own node, as in the
driver's and the twin's processes). Every wait is for the event it needs (an answer, a joint state,
a motor at its goal) with a bound only a broken link reaches.
"""

import time

import numpy as np
import pytest

pytest.importorskip("rclpy", reason="needs the ROS 2 wheels (requirements/ros.txt)")

from ladder_ros.messages import SchemaError, decode, encode  # noqa: E402
from ladder_ros.robots import dynamixel as dxl  # noqa: E402
from ladder_ros.instruments.widowx_twin import xs_msgs, xs_wire  # noqa: E402

pytestmark = pytest.mark.ros
WAIT_S = 30.0  # only a broken link gets near it


def wait_for(condition, what, timeout_s=WAIT_S):
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.005)


def test_calls_and_replies_round_trip_strictly():
    request = xs_msgs.RegisterValues.Request(cmd_type="group", name="arm", reg="Profile_Velocity", value=250)
    call = decode(encode(xs_wire.XsSdkCall.of(7, "set_motor_registers", request)), xs_wire.XsSdkCall)
    assert call.typed_request() == request and call.call_id == 7
    info = xs_msgs.RobotInfo.Response(mode="position", joint_names=["waist"], joint_lower_limits=[-3.14])
    reply = decode(encode(xs_wire.XsSdkReply.of(7, "get_robot_info", info)), xs_wire.XsSdkReply)
    assert reply.typed_response() == info
    with pytest.raises(SchemaError, match="xs_sdk has no service 'reboot'"):
        xs_wire.XsSdkCall(call_id=1, service="reboot", request={})
    with pytest.raises(SchemaError, match="unknown field 'speed'"):
        xs_wire.XsSdkCall(call_id=1, service="torque_enable", request={"speed": 1}).typed_request()
    with pytest.raises(SchemaError, match="a stall names the joint"):
        xs_wire.TwinFault(fault="stall")
    assert xs_wire.topic("wx250s", xs_wire.CALL_TOPIC) == "/wx250s/xs_sdk/call"


@pytest.fixture
def link():
    """A simulated xs_sdk served on ROS by one node, and a RemoteXsSdk client of it with its own node."""
    import rclpy
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.node import Node

    from ladder_ros.instruments.widowx_twin.remote import RemoteXsSdk
    from ladder_ros.instruments.widowx_twin.ros_server import XsSdkRosServer
    from ladder_ros.instruments.widowx_twin.xs_sdk import SimulatedXsSdk

    rclpy.init()
    sdk = SimulatedXsSdk()
    node = Node("twin_under_test")
    server = XsSdkRosServer(node, sdk, "wx_test")
    executor = SingleThreadedExecutor()
    executor.add_node(node)
    import threading

    spinning = threading.Thread(target=executor.spin, daemon=True)
    spinning.start()
    client = RemoteXsSdk("wx_test", node_name="client_under_test")
    try:
        yield sdk, server, client
    finally:
        client.stop()
        sdk.stop()
        executor.shutdown(timeout_sec=1.0)
        node.destroy_node()
        rclpy.try_shutdown()
        spinning.join(timeout=2.0)


def test_a_remote_call_is_answered_by_the_served_motors_and_commands_move_them(link):
    sdk, server, client = link
    # A call made before the twin is discovered waits for it, as a service request waits for its server.
    info = client.call("get_robot_info", xs_msgs.RobotInfo.Request(cmd_type="group", name="arm")).result(WAIT_S)
    assert info.joint_names == ["waist", "shoulder", "elbow", "forearm_roll", "wrist_angle", "wrist_rotate"]
    assert (info.mode, info.profile_type) == ("position", "time")
    samples = []
    client.subscribe_joint_states(samples.append)
    wait_for(lambda: len(samples) >= 5, "joint states from the twin")
    assert samples[-1].name[:6] == tuple(info.joint_names) and "left_finger" in samples[-1].name
    for register, value in ((dxl.PROFILE_VELOCITY, 250), (dxl.PROFILE_ACCELERATION, 100)):
        client.call("set_motor_registers", xs_msgs.RegisterValues.Request(
            cmd_type="group", name="arm", reg=register, value=value)).result(WAIT_S)
    values = client.call("get_motor_registers", xs_msgs.RegisterValues.Request(
        cmd_type="group", name="arm", reg=dxl.PROFILE_VELOCITY)).result(WAIT_S).values
    assert values == [250] * 6 and sdk.calls_of("set_motor_registers")[0].value == 250
    goal = [0.1, -0.5, 0.4, 0.0, 0.9, -0.2]
    client.publish("commands/joint_group", xs_msgs.JointGroupCommand(name="arm", cmd=goal))
    wait_for(lambda: np.allclose(samples[-1].position[:6], goal, atol=1e-6), "the arm at its goal")
    client.publish("commands/joint_single", xs_msgs.JointSingleCommand(name="gripper", cmd=-250.0))
    wait_for(lambda: samples[-1].position[7] <= 0.0151, "the fingers closed at their limit")


def test_a_hung_service_keeps_the_remote_call_waiting_until_released(link):
    sdk, server, client = link
    client.call("get_robot_info", xs_msgs.RobotInfo.Request(cmd_type="group", name="arm")).result(WAIT_S)
    server.inject(xs_wire.TwinFault(fault=xs_wire.HANG, service="reboot_motors"))
    future = client.call("reboot_motors", xs_msgs.Reboot.Request(cmd_type="group", name="arm", enable=True))
    wait_for(lambda: sdk.calls_of("reboot_motors"), "the reboot to reach the twin")
    time.sleep(0.3)  # not a wait for an event: the check that nothing answers a hung call
    assert not future.done() and client.pending() == 1
    server.inject(xs_wire.TwinFault(fault=xs_wire.RELEASE_HANG, service="reboot_motors"))
    assert future.result(WAIT_S) == xs_msgs.Reboot.Response()


def test_the_twin_api_runs_unchanged_over_the_remote_xs_sdk(link):
    from ladder_ros.instruments import widowx_twin
    from ladder_ros.instruments.widowx_twin import xs_sdk

    sdk, server, client = link
    xs_sdk.register("wx_test", client)
    api = widowx_twin.api()
    import rclpy

    node = api.robot_node(node_name="api_under_test", use_global_arguments=False)
    try:
        bot = api.manipulator(robot_model="wx250s", group_name="arm", gripper_name="gripper", robot_name="wx_test",
                              moving_time=0.25, accel_time=0.1, node=node)
        api.robot_startup(node)
        # The constructor's quirk survives the transport: it wrote no profile register.
        assert sdk.calls_of("set_motor_registers") == []
        target = list(np.array(bot.arm.get_joint_positions()) + 0.05)
        assert bot.arm.set_joint_positions(target, blocking=False)
        wait_for(lambda: np.allclose(bot.arm.get_joint_positions(), target, atol=1e-4), "the arm at the target")
        with sdk.motor_lock:
            sdk.motors.inject_error("elbow")
        errors = bot.core.robot_get_motor_registers("group", "arm", dxl.HARDWARE_ERROR_STATUS)
        assert errors[2] == dxl.OVERLOAD and sum(errors) == dxl.OVERLOAD
    finally:
        widowx_twin.reset()
        assert rclpy.ok()


class Gate:
    """An rclpy endpoint whose match count reads 0 until opened: discovery that has matched one direction only."""

    def __init__(self, endpoint, count: str):
        self._endpoint, self._count, self.open = endpoint, count, False
        setattr(self, count, lambda: getattr(self._endpoint, self._count)() if self.open else 0)

    def __getattr__(self, name):
        return getattr(self._endpoint, name)


def test_a_call_waits_until_the_clients_reply_subscription_has_matched_the_twin(link):
    sdk, server, client = link
    client.call("get_robot_info", xs_msgs.RobotInfo.Request(cmd_type="group", name="arm")).result(WAIT_S)
    asked = len(sdk.calls_of("get_robot_info"))
    client._reply_sub = gate = Gate(client._reply_sub, "get_publisher_count")
    assert not client.server_is_available() and not client.connected
    future = client.call("get_robot_info", xs_msgs.RobotInfo.Request(cmd_type="group", name="arm"))
    time.sleep(0.3)  # not a wait for an event: the check that the call is not sent before the match
    assert len(sdk.calls_of("get_robot_info")) == asked and not future.done()
    gate.open = True
    assert len(future.result(WAIT_S).joint_names) == 6 and len(sdk.calls_of("get_robot_info")) == asked + 1


def test_an_answer_waits_until_its_caller_has_matched_the_twins_reply_publisher(link):
    sdk, server, client = link
    client.call("get_robot_info", xs_msgs.RobotInfo.Request(cmd_type="group", name="arm")).result(WAIT_S)
    server._reply_pub = gate = Gate(server._reply_pub, "get_subscription_count")
    assert not server.callers_hear_replies()
    future = client.call("get_motor_registers", xs_msgs.RegisterValues.Request(
        cmd_type="group", name="arm", reg=dxl.PROFILE_VELOCITY))
    wait_for(lambda: server._held, "the twin to hold its answer")
    assert sdk.calls_of("get_motor_registers") and not future.done()
    gate.open = True
    assert len(future.result(WAIT_S).values) == 6 and not server._held


def test_an_answer_held_for_an_unmatched_caller_goes_out_after_its_bound(link, monkeypatch):
    from ladder_ros.instruments.widowx_twin import ros_server

    sdk, server, client = link
    client.call("get_robot_info", xs_msgs.RobotInfo.Request(cmd_type="group", name="arm")).result(WAIT_S)
    monkeypatch.setattr(ros_server, "REPLY_MATCH_WAIT_S", 0.5)
    server._reply_pub = Gate(server._reply_pub, "get_subscription_count")  # never opened: a caller gone missing
    asked = time.monotonic()
    future = client.call("torque_enable", xs_msgs.TorqueEnable.Request(cmd_type="group", name="arm", enable=True))
    assert future.result(WAIT_S) == xs_msgs.TorqueEnable.Response() and time.monotonic() - asked >= 0.5
