"""What the policy node publishes besides the action: its tag, joint-position actions, diagnostics."""

import numpy as np
import pytest

pytest.importorskip("rclpy", reason="needs the ROS 2 wheels (requirements/ros.txt)")

from diagnostic_msgs.msg import DiagnosticStatus  # noqa: E402

from ladder_ros.core.errors import InvalidInputError  # noqa: E402
from ladder_ros.messages import ActionTagDoc, SchemaError, decode, encode  # noqa: E402
from ladder_ros.ros_conversions import action_to_msg, diagnostics_to_msg, stamp_to_ns  # noqa: E402


def test_the_action_tag_round_trips_and_refuses_nonsense():
    tag = ActionTagDoc(episode_id="ep", stamp_ns=2_000_000_000, observation_stamp_ns=1_800_000_000,
                       subgoal="put the carrot on the plate", chunk_id=3, index=2, policy="bridge_pi0_server",
                       inference_ms=41.5)
    assert decode(encode(tag), ActionTagDoc) == tag
    with pytest.raises(SchemaError, match="chunk_id and index must be >= 0"):
        ActionTagDoc(episode_id="ep", stamp_ns=0, observation_stamp_ns=0, subgoal="x", chunk_id=0, index=-1,
                     policy="p")
    with pytest.raises(SchemaError, match="field 'subgoal' must be str"):
        ActionTagDoc(episode_id="ep", stamp_ns=0, observation_stamp_ns=0, subgoal=None, chunk_id=0, index=0,
                     policy="p")


def test_joint_position_actions_carry_their_configs_axes():
    axes = [f"panda_joint{i}" for i in range(1, 8)] + ["gripper_position"]
    msg = action_to_msg(np.arange(8) / 10.0, 5, axes)
    assert list(msg.joint_names) == axes and list(msg.points[0].positions) == list(np.arange(8) / 10.0)
    assert stamp_to_ns(msg.header.stamp) == 5
    with pytest.raises(InvalidInputError, match="needs 8 finite numbers"):
        action_to_msg(np.r_[np.zeros(7), np.nan], 5, axes)
    with pytest.raises(InvalidInputError, match="needs 8 finite numbers"):
        action_to_msg(np.zeros(7), 5, axes)


def test_diagnostics_say_ok_or_why_not():
    values = {"inference_ms_p50": 41.234567, "chunks": 3, "server_timing": {"infer_ms": 40.0}, "inference_ms_p99": None}
    ok = diagnostics_to_msg("/widowx/policy: bridge", "bridge", "ok", "acting", values, 7)
    status = ok.status[0]
    assert status.level == DiagnosticStatus.OK and status.message == "acting"
    assert {kv.key: kv.value for kv in status.values} == {"inference_ms_p50": "41.2346", "chunks": "3",
                                                          "server_timing.infer_ms": "40", "inference_ms_p99": ""}
    held = diagnostics_to_msg("p", "bridge", "warn", "no policy server: refused", {}, 7).status[0]
    assert held.level == DiagnosticStatus.WARN and held.message == "no policy server: refused"
