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


def _claim_in_isolation(monkeypatch, tmp_path, pid: int, shm_ports=(), udp_ports=()):
    """claim_domain_id() as a process with ``pid`` would run it, with its own lock folder, shared-memory
    folder and UDP table, so that the answer depends only on what the test puts there."""
    from ladder_ros import ros_env

    shm, locks, table = tmp_path / "shm", tmp_path / "locks", tmp_path / "udp"
    shm.mkdir(parents=True, exist_ok=True)
    for name in shm_ports:
        (shm / name).touch()
    table.write_text("  sl  local_address rem_address   st\n" + "".join(
        f"   {i}: 0100007F:{port:04X} 00000000:0000 07\n" for i, port in enumerate(udp_ports)))
    monkeypatch.setattr(ros_env, "_SHM_DIR", str(shm))
    monkeypatch.setattr(ros_env, "_UDP_TABLES", (str(table),))
    monkeypatch.setattr(ros_env, "_LOCK_DIR", locks)
    monkeypatch.setattr(ros_env, "_held_locks", {})
    monkeypatch.setattr(ros_env.os, "getpid", lambda: pid)
    try:
        return ros_env.claim_domain_id()
    finally:
        for fd in ros_env._held_locks.values():
            os.close(fd)


def test_a_domain_whose_dds_ports_are_in_use_is_passed_over(tmp_path, monkeypatch):
    """Another graph on this machine that takes no lock (a plain ROS 2 program, a test run in another network
    namespace, whose shared-memory ports are visible here) is never joined."""
    pid = 4242
    first = _claim_in_isolation(monkeypatch, tmp_path / "a", pid)
    assert first == 1 + pid % 101  # where a process with this pid starts looking
    # someone uses that domain: a user-data shared-memory port (7411 + 250 * id); the next one has a stale
    # Fast RTPS 2.x segment; the one after a UDP socket in this namespace
    shm = [f"fastdds_port{7411 + 250 * first}", f"fastrtps_port{7410 + 250 * (first + 1)}"]
    udp = [7400 + 250 * (first + 2) + 249]
    assert _claim_in_isolation(monkeypatch, tmp_path / "b", pid, shm, udp) == first + 3
    # ports outside every domain's range, and other files, take nothing away
    assert _claim_in_isolation(monkeypatch, tmp_path / "c", pid, ["fastdds_port7000", "sem.fastdds_port7411_mutex",
                                                                  "fastdds_0123456789abcdef"]) == first


def test_when_every_free_domain_shows_ports_one_is_still_claimed(tmp_path, monkeypatch):
    """Segments left behind by processes that died do not leave a machine without a domain id."""
    every = [f"fastdds_port{7411 + 250 * d}" for d in range(1, 102)]
    assert _claim_in_isolation(monkeypatch, tmp_path, 4242, every) == 1 + 4242 % 101


def test_udp_ports_bound_in_this_namespace_count_as_in_use(tmp_path, monkeypatch):
    from ladder_ros import ros_env

    table = tmp_path / "udp"
    # /proc/net/udp: a header, then "sl local_address rem_address ..." with hexadecimal ports
    table.write_text("  sl  local_address rem_address   st\n   0: 0100007F:1CF3 00000000:0000 07\n")
    monkeypatch.setattr(ros_env, "_UDP_TABLES", (str(table),))
    monkeypatch.setattr(ros_env, "_SHM_DIR", str(tmp_path / "none"))
    assert ros_env.ports_in_use() == {0x1CF3}
    assert 0x1CF3 in ros_env.domain_ports(0)  # 7411: domain 0's first user-data port
