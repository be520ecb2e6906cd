"""The network-safe environment every graph runs in (docs/dependencies.md, "Network safety")."""

import os
import subprocess
import sys

from ladder_ros.ros_env import fastdds_profile, is_network_safe, network_safe_environment


def test_this_test_session_is_loopback_only():
    # tests/conftest.py applied it before any test module could import rclpy
    assert os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] == "LOCALHOST"
    assert is_network_safe()
    assert os.environ["FASTDDS_DEFAULT_PROFILES_FILE"] == str(fastdds_profile())


def test_profile_whitelists_loopback_and_enlarges_shared_memory():
    text = fastdds_profile().read_text()
    assert "<address>127.0.0.1</address>" in text
    assert "<useBuiltinTransports>false</useBuiltinTransports>" in text
    assert "<segment_size>33554432</segment_size>" in text


def test_environment_drops_settings_that_could_reach_another_machine():
    env = network_safe_environment({"ROS_STATIC_PEERS": "10.0.0.5", "ROS_DISCOVERY_SERVER": "10.0.0.5:11811",
                                    "ROS_AUTOMATIC_DISCOVERY_RANGE": "SUBNET"})
    assert env["ROS_AUTOMATIC_DISCOVERY_RANGE"] == "LOCALHOST" and env["ROS_LOCALHOST_ONLY"] == "1"
    assert "ROS_STATIC_PEERS" not in env and "ROS_DISCOVERY_SERVER" not in env
    assert 1 <= int(env["ROS_DOMAIN_ID"]) <= 101


def test_concurrent_processes_claim_different_domain_ids():
    code = ("from ladder_ros.ros_env import claim_domain_id; import time; "
            "print(claim_domain_id(), flush=True); time.sleep(2)")
    clean = {k: v for k, v in os.environ.items() if k not in ("ROS_DOMAIN_ID", "LADDER_ROS_NETWORK_SAFE")}
    procs = [subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, env=clean)
             for _ in range(3)]
    ids = [int(p.stdout.readline()) for p in procs]
    for p in procs:
        p.wait(timeout=10)
    assert len(set(ids)) == 3 and str(os.environ["ROS_DOMAIN_ID"]) not in map(str, ids)
