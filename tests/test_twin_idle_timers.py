"""The twin's xs_sdk link wakes its executors only while there is something to send.

The client's timer that sends calls made before the twin listened, and the server's timer that sends
answers held for a caller not matched yet, each ran at 100 Hz for good, waking the driver's and the
twin's executors (and taking the GIL from the driver's control thread) for nothing. They run only
while a call or an answer waits. The link fixture and the gates are test_twin_remote_xs_sdk.py's.
"""

import pytest

pytest.importorskip("rclpy", reason="needs the ROS 2 wheels (requirements/ros.txt)")

from ladder_ros.robots import dynamixel as dxl  # noqa: E402
from ladder_ros.instruments.widowx_twin import xs_msgs  # noqa: E402
from tests import test_twin_remote_xs_sdk as remote  # noqa: E402

pytestmark = pytest.mark.ros
link = remote.link  # the fixture
WAIT_S, Gate, wait_for = remote.WAIT_S, remote.Gate, remote.wait_for


def info_request():
    return xs_msgs.RobotInfo.Request(cmd_type="group", name="arm")


def test_the_clients_timer_runs_only_while_a_call_waits_for_the_twin_to_listen(link):
    sdk, server, client = link
    client.call("get_robot_info", info_request()).result(WAIT_S)
    assert client._flush_timer.is_canceled()  # answered: nothing waits
    client._reply_sub = gate = Gate(client._reply_sub, "get_publisher_count")
    future = client.call("get_robot_info", info_request())
    assert not client._flush_timer.is_canceled() and not future.done()  # it waits, and is looked at again
    gate.open = True
    assert len(future.result(WAIT_S).joint_names) == 6
    assert client._flush_timer.is_canceled()


def test_the_servers_timer_runs_only_while_an_answer_is_held(link):
    sdk, server, client = link
    client.call("get_robot_info", info_request()).result(WAIT_S)
    wait_for(lambda: server._held_timer.is_canceled(), "the server's timer to stop once nothing is held")
    server._reply_pub = gate = Gate(server._reply_pub, "get_subscription_count")
    future = client.call("get_motor_registers", xs_msgs.RegisterValues.Request(
        cmd_type="group", name="arm", reg=dxl.PROFILE_VELOCITY))
    wait_for(lambda: server._held, "the twin to hold its answer")
    assert not server._held_timer.is_canceled()
    gate.open = True
    assert len(future.result(WAIT_S).values) == 6
    wait_for(lambda: server._held_timer.is_canceled(), "the server's timer to stop once the answer went out")
