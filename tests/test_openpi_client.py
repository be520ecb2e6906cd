"""The openpi protocol client, proven against openpi-client itself (its own msgpack_numpy and websocket client,
running in a separate numpy<2 environment), and against a misbehaving peer: wrong action dimension, NaN,
out-of-bounds actions, a server error, a disconnect mid-episode, slow replies and no server at all give clear
errors, reconnects with back-off, and a robot that holds still. Everything binds 127.0.0.1."""

import dataclasses
import json
import logging
import re
import select
import socket
import subprocess
import threading
import time
import warnings
from pathlib import Path

import msgpack
import numpy as np
import pytest

from ladder_ros.policies.chunked import ChunkedPolicy
from ladder_ros.policies.config import ServerSettings
from ladder_ros.policies.executor import ChunkExecutor
from ladder_ros.core.errors import LadderError
from ladder_ros.instruments.openpi_fake_server import DISCONNECT, SILENT, FakePolicyServer
from ladder_ros.policies.openpi_remote import (OpenPIClient, OpenPISource, PolicyServerError, PolicyUnavailable,
                                               traceback_signature)
from ladder_ros.policies.openpi_wire import WireFormatError, packb, unpackb
from tests.openpi_samples import describe, samples
from tests.policy_fixtures import BRIDGE_LIKE, bundle, make_config

REPO = Path(__file__).resolve().parent.parent
PEER_PYTHON = REPO / ".venv-openpi" / "bin" / "python"
PEER_SCRIPT = REPO / "tests" / "openpi_peer.py"
needs_peer = pytest.mark.skipif(not PEER_PYTHON.exists(), reason="the openpi-client peer environment .venv-openpi "
                                "is missing (scripts/setup.sh builds it)")


def peer(*args, stdin: str = "", timeout: float = 120) -> str:
    result = subprocess.run([str(PEER_PYTHON), str(PEER_SCRIPT), *args], input=stdin, capture_output=True,
                            text=True, timeout=timeout)
    assert result.returncode == 0, result.stderr
    return result.stdout


class PeerServer:
    """The openpi-client peer serving on 127.0.0.1 with a chosen behaviour, for one test."""

    def __init__(self, *args: str):
        self.args = args

    def __enter__(self) -> "PeerServer":
        self.process = subprocess.Popen([str(PEER_PYTHON), str(PEER_SCRIPT), "server", *self.args],
                                        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        ready, _, _ = select.select([self.process.stdout], [], [], 120)  # a cap: it answers once listening
        line = self.process.stdout.readline() if ready else ""
        if not line.startswith("READY "):
            self.process.kill()
            raise RuntimeError(f"peer server did not start: {line!r} {self.process.stderr.read()}")
        self.port = int(line.split()[1])
        return self

    def settings(self, **changes) -> ServerSettings:
        values = dict(host="127.0.0.1", port=self.port, connect_timeout_s=10.0, request_timeout_s=10.0,
                      backoff_initial_s=0.2, backoff_max_s=0.8)
        values.update(changes)
        return ServerSettings(**values)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(30)

    def __exit__(self, *exc) -> None:
        self.stop()


def config_for(port: int, **server):
    return make_config(server={**BRIDGE_LIKE["server"], "port": port, **server})


# ------------------------------------------------------------------------------ the wire format
@needs_peer
def test_our_bytes_are_openpi_clients_bytes():
    theirs = peer("samples").split()
    ours = [packb(sample).hex() for sample in samples()]
    assert ours == theirs


@needs_peer
def test_openpi_client_reads_what_we_pack_and_we_read_what_it_packs():
    lines = peer("decode", stdin="\n".join(packb(s).hex() for s in samples())).splitlines()
    assert [json.loads(line) for line in lines] == [json.loads(json.dumps(describe(s))) for s in samples()]
    for hex_message, sample in zip(peer("samples").split(), samples()):
        assert describe(unpackb(bytes.fromhex(hex_message))) == describe(sample)


def test_decoding_refuses_what_is_not_openpi_numpy():
    def message(**fields):
        tag = {b"__ndarray__": True, b"data": b"\0" * 8, b"dtype": "<f8", b"shape": [1]}
        tag.update({k.encode(): v for k, v in fields.items()})
        return msgpack.packb({"actions": tag}, use_bin_type=True)

    assert unpackb(message())["actions"].tolist() == [0.0]
    for fields, why in (({"dtype": "|O"}, "refused array dtype"), ({"dtype": "<c16"}, "refused array dtype"),
                        ({"dtype": "V8"}, "refused array dtype"), ({"dtype": "nonsense"}, "unknown array dtype"),
                        ({"shape": [2]}, "needs 16 bytes, got 8"), ({"shape": [-1]}, "malformed array shape"),
                        ({"data": "text"}, "array data must be bytes"), ({"extra": 1}, "malformed array")):
        with pytest.raises(WireFormatError, match=why):
            unpackb(message(**fields))
    with pytest.raises(WireFormatError, match="extension type"):
        unpackb(msgpack.packb(msgpack.ExtType(5, b"x")))
    import pickle

    with pytest.raises(WireFormatError):
        unpackb(pickle.dumps({"actions": np.zeros(3)}))  # a pickle is never unpickled: it is not valid msgpack
    with pytest.raises(WireFormatError, match="exceeds the limit"):
        unpackb(packb({"a": np.zeros(100)}), max_bytes=100)
    with pytest.raises(WireFormatError, match="unsupported dtype"):
        packb({"a": np.array([object()])})
    decoded = unpackb(packb({"a": np.arange(3.0)}))["a"]
    decoded[0] = 5.0  # a writable copy, not a view into the message
    assert decoded.tolist() == [5.0, 1.0, 2.0]


def test_scalars_and_arrays_round_trip_as_openpi_tags_them():
    # openpi_client/msgpack_numpy.py (Physical-Intelligence/openpi, packages/openpi-client): a numpy scalar is
    # {b"__npgeneric__": True, b"data": item, b"dtype": dtype.str}; an array {b"__ndarray__": True, b"data": bytes,
    # b"dtype": dtype.str, b"shape": shape}.
    raw = msgpack.unpackb(packb({"count": np.int64(7), "flag": np.bool_(True), "half": np.float32(0.5)}), raw=False)
    assert raw == {"count": {b"__npgeneric__": True, b"data": 7, b"dtype": "<i8"},
                   "flag": {b"__npgeneric__": True, b"data": True, b"dtype": "|b1"},
                   "half": {b"__npgeneric__": True, b"data": 0.5, b"dtype": "<f4"}}
    assert msgpack.unpackb(packb(np.arange(2, dtype=np.int16)), raw=False) == {
        b"__ndarray__": True, b"data": b"\0\0\1\0", b"dtype": "<i2", b"shape": [2]}
    for sample in samples():  # what the peer test compares with openpi-client, here without its environment
        assert describe(unpackb(packb(sample))) == describe(sample)
    back = unpackb(packb({"count": np.int64(7), "flag": np.bool_(True), "half": np.float32(0.5)}))
    assert type(back["count"]) is np.int64 and type(back["flag"]) is np.bool_ and type(back["half"]) is np.float32
    assert (back["count"], back["flag"], back["half"]) == (7, True, 0.5)


def test_decoding_refuses_a_scalar_that_is_not_openpi_numpy():
    def message(**fields):
        tag = {b"__npgeneric__": True, b"data": 3, b"dtype": "<i8"}
        tag.update({k.encode(): v for k, v in fields.items()})
        return msgpack.packb({"n": tag}, use_bin_type=True)

    assert unpackb(message())["n"] == 3
    for fields, why in (({"extra": 1}, r"malformed scalar: fields .*b'extra'"),
                        ({"dtype": "|O"}, "refused array dtype '|O'"),
                        ({"data": True}, "scalar of dtype <i8 cannot hold True"),
                        ({"data": "3"}, "scalar of dtype <i8 cannot hold '3'"),
                        ({"data": 300, "dtype": "|u1"}, "scalar of dtype |u1 cannot hold 300")):
        with pytest.raises(WireFormatError, match=why):
            unpackb(message(**fields))
    no_dtype = {b"__npgeneric__": True, b"data": 3}
    with pytest.raises(WireFormatError, match="malformed scalar"):
        unpackb(msgpack.packb({"n": no_dtype}, use_bin_type=True))
    assert unpackb(message(data=True, dtype="|b1"))["n"] == np.bool_(True)
    assert unpackb(message(data=2.5, dtype="<f8"))["n"] == 2.5


# ------------------------------------------------------------------------------ the protocol
@needs_peer
def test_client_against_the_openpi_peer_server():
    with PeerServer("--mode", "normal") as server:
        client = OpenPIClient(server.settings())
        assert client.healthy()
        metadata = client.connect()
        assert metadata["peer"] == "openpi-client" and metadata["numpy"].startswith("1.")
        source = OpenPISource(config_for(server.port), client=client)
        first = source.infer(bundle(), "put the carrot on the plate", noise_seed=0)
        second = source.infer(bundle(), "put the carrot on the plate", noise_seed=1)
        # The peer echoes what openpi-client decoded from our request.
        echo = client.infer(source.encoder.openpi_request(bundle(), "put the carrot on the plate")).data["echo"]
    assert first.actions.shape == (5, 7) and first.actions.dtype == np.float32
    assert np.allclose(first.actions, 0.01)
    assert "infer_ms" in first.server_timing and "prev_total_ms" in second.server_timing
    assert echo["prompt"] == "put the carrot on the plate"
    assert echo["observation/state"] == {"ndarray": "<f8", "shape": [7], "values": [0.3, 0.0, 0.1, 0.0, 0.0, 0.0, 1.0]}


@needs_peer
def test_openpi_own_client_talks_to_our_stand_in_server():
    def respond(observation):
        state = observation["observation/state"]
        return {"actions": np.tile(state[:7].astype(np.float32), (5, 1))}

    with FakePolicyServer(respond, metadata={"policy": "stand-in", "action_horizon": 5}) as server:
        result = json.loads(peer("client", "--port", str(server.port), "--steps", "3"))
    assert result["metadata"] == {"policy": "stand-in", "action_horizon": 5}
    replies = result["replies"]
    assert [r["actions"]["shape"] for r in replies] == [[5, 7]] * 3
    assert replies[2]["actions"]["values"][:7] == [2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]
    assert "infer_ms" in replies[0]["server_timing"] and "prev_total_ms" in replies[1]["server_timing"]


# ------------------------------------------------------------------------------ misbehaving peers
def wait_for(predicate, cap_s: float = 60.0, step=None) -> None:
    """Until ``predicate()`` (a cap, never a timing assertion: it returns as soon as the condition holds)."""
    deadline = time.monotonic() + cap_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached")
        if step is not None:
            step()
        time.sleep(0.005)


def running_executor(port: int, **server):
    config = config_for(port, **server)
    messages = []
    executor = ChunkExecutor(OpenPISource(config), config, lambda: (bundle(), time.monotonic()),
                             lambda now: 0.0, log=messages.append)
    executor.start()
    executor.set_subgoal("put the carrot on the plate")
    return executor, messages


@needs_peer
@pytest.mark.parametrize("mode, why", [
    ("wrong_dim", "wrong action dimension: 8 numbers per action, the config expects 7 (ee_dx, ee_dy, ee_dz, "
                  "ee_droll, ee_dpitch, ee_dyaw, gripper)"),
    ("nan", "action 1, axis ee_dz is nan (not a finite number)"),
    ("out_of_bounds", "action 0, axis ee_dx = 5 m is outside the config's bounds [-0.1, 0.1]"),
])
def test_a_bad_chunk_from_the_server_holds_the_robot_and_says_why(mode, why):
    with PeerServer("--mode", mode) as server:
        executor, messages = running_executor(server.port)
        try:
            actions = []
            wait_for(lambda: executor.rejected >= 2, step=lambda: actions.append(executor.tick()))
        finally:
            executor.stop()
    assert actions and all(a is None for a in actions)  # nothing was ever published
    assert executor.stats()["holding"].startswith("invalid action: chunk ") and why in executor.stats()["holding"]
    refusals = [m for m in messages if "invalid action" in m]
    assert refusals == [f"holding still: invalid action: chunk 0: {why}"]  # said once, for every refused chunk


@needs_peer
def test_a_disconnect_mid_episode_holds_then_reconnects_with_back_off():
    with PeerServer("--mode", "disconnect", "--after", "2") as server:
        client = OpenPIClient(server.settings())
        source = OpenPISource(config_for(server.port), client=client)
        source.infer(bundle(), "go", 0)
        source.infer(bundle(), "go", 1)
        with pytest.raises(PolicyUnavailable, match=r"lost the policy server at ws://127.0.0.1:\d+: .*retrying in "
                                                    r"0.2 s"):
            source.infer(bundle(), "go", 2)
        with pytest.raises(PolicyUnavailable, match=r"not connected \(lost the policy server .*\); next attempt in "
                                                    r"0.[12] s"):
            source.infer(bundle(), "go", 3)  # at once, without blocking
        wait_for(lambda: _succeeds(source))  # after the back-off it reconnects (a fresh connection)
        assert client.connects == 2 and client.failures == 1
        server.stop()  # the server goes away for good: each attempt waits twice as long, up to the cap
        delays = []
        for _ in range(4):
            wait_for(lambda: client._retry_at <= time.monotonic())
            with pytest.raises(PolicyUnavailable) as caught:
                source.infer(bundle(), "go", 9)
            delays.append(str(caught.value).rsplit("retrying in ", 1)[1])
        assert delays == ["0.2 s", "0.4 s", "0.8 s", "0.8 s"]
        assert not client.healthy(timeout_s=2.0)


def _succeeds(source) -> bool:
    try:
        source.infer(bundle(), "go", 0)
        return True
    except PolicyUnavailable:
        return False


@needs_peer
def test_a_disconnect_holds_the_wall_clock_executor_until_the_server_is_back():
    with PeerServer("--mode", "disconnect", "--after", "3") as server:
        executor, messages = running_executor(server.port, backoff_initial_s=0.2, backoff_max_s=0.4)
        try:
            given = []
            wait_for(lambda: executor.stats()["holds"].get("no policy server", 0) > 0,
                     step=lambda: given.append(executor.tick()))
            assert any(a is not None for a in given)  # it acted before the disconnect
            wait_for(lambda: executor.tick() is not None)  # and acts again after reconnecting
        finally:
            executor.stop()
    # said once it holds (realtime: when the queue runs out, by then maybe about the reconnection it waits for)
    assert any(m.startswith("holding still: no policy server: ") and "lost the policy server" in m
               for m in messages), messages
    assert "acting again" in messages


@needs_peer
def test_slow_replies_time_out_and_the_connection_is_dropped():
    with PeerServer("--mode", "normal", "--delay", "3.0") as server:
        client = OpenPIClient(server.settings(request_timeout_s=0.3))
        source = OpenPISource(config_for(server.port), client=client)
        with pytest.raises(PolicyUnavailable, match="sent no reply within 0.3 s; the connection is dropped"):
            source.infer(bundle(), "go", 0)
        assert not client.connected
        with pytest.raises(PolicyUnavailable, match="sent no reply within 0.3 s"):
            source.infer(bundle(), "go", 1)  # a slow server is not a dead one: it reconnects at once
        assert client.connects == 2


@needs_peer
def test_a_server_error_is_reported_with_its_last_line():
    with PeerServer("--mode", "error", "--after", "0") as server:
        source = OpenPISource(config_for(server.port), client=OpenPIClient(server.settings()))
        with pytest.raises(PolicyServerError, match="the policy server failed: ValueError: observation/image has "
                                                    "the wrong shape"):
            source.infer(bundle(), "go", 0)


def test_no_server_at_all_is_a_clear_error_and_the_lockstep_policy_raises_it():
    with FakePolicyServer() as server:
        port = server.port  # a port that was just free and is closed again now
    client = OpenPIClient(ServerSettings(port=port, connect_timeout_s=2.0, backoff_initial_s=0.2))
    assert not client.healthy(timeout_s=2.0)
    policy = ChunkedPolicy(OpenPISource(config_for(port), client=client), config_for(port), seed=0)
    with pytest.raises(PolicyUnavailable, match=rf"cannot connect to the policy server at ws://127.0.0.1:{port}: "):
        policy.act_tagged(bundle(), "go")
    assert policy.chunks == 0  # the failed request did not use up a noise seed: a retry asks for chunk 0 again


def test_the_stand_in_server_misbehaves_on_request():
    replies = iter([{"actions": np.zeros((5, 7))}, "Traceback ...\nRuntimeError: out of memory", DISCONNECT])
    with FakePolicyServer(lambda observation: next(replies)) as server:
        source = OpenPISource(config_for(server.port), client=OpenPIClient(ServerSettings(port=server.port)))
        assert source.infer(bundle(), "go", 0).actions.shape == (5, 7)
        with pytest.raises(PolicyServerError, match="RuntimeError: out of memory"):
            source.infer(bundle(), "go", 1)
        source.client._retry_at = 0.0
        with pytest.raises(PolicyUnavailable, match="lost the policy server"):
            source.infer(bundle(), "go", 2)
        assert server.connections == 2 and server.requests == 3


# ------------------------------------------------------------------ the wire format's refusals, exactly
def _array_map(dtype, shape=(2,), data=None):
    return {b"__ndarray__": True, b"data": np.zeros(2, "<f4").tobytes() if data is None else data, b"dtype": dtype,
            b"shape": list(shape) if isinstance(shape, tuple) else shape}


def _refusal(message) -> str:
    with pytest.raises(WireFormatError) as caught:
        unpackb(msgpack.packb(message, use_bin_type=True))
    return str(caught.value)


def test_values_the_wire_cannot_carry_are_refused_by_name():
    with pytest.raises(WireFormatError, match=r"^cannot send a object in an openpi message$"):
        packb({"x": object()})
    with pytest.raises(WireFormatError, match=r"^cannot encode the message: 'utf-8' codec can't encode"):
        packb({"text": "a\udc80"})  # a lone surrogate has no UTF-8 form
    assert packb(b"ab") == b"\xc4\x02ab"  # bytes go as msgpack bin (openpi's use_bin_type=True), not as str


def test_array_dtypes_are_read_as_ascii_and_refused_exactly():
    assert unpackb(msgpack.packb(_array_map(b"<f4"), use_bin_type=True)).dtype == np.dtype("<f4")
    # non-ASCII bytes are replaced, never decoded as UTF-8 into a name numpy might know
    assert _refusal(_array_map("<f\u00e9".encode())) == "unknown array dtype '<f\ufffd\ufffd'"
    assert _refusal(_array_map(5)) == "array dtype must be a short numpy dtype string, got 5"
    # 9 characters is past the limit even for a dtype numpy knows
    assert _refusal(_array_map("complex64")) == ("array dtype must be a short numpy dtype string, got "
                                                 "'complex64'")
    assert _refusal(_array_map("<c8")) == "refused array dtype '<c8' (only booleans, integers and floats are read)"


def test_array_shapes_and_data_are_refused_exactly():
    assert _refusal(_array_map("<f4", shape=5)) == "malformed array shape 5"
    ones = [1] * 32  # numpy allows 64 dimensions; the wire takes 32
    assert unpackb(msgpack.packb(_array_map("<f4", shape=[*ones[:-1], 2]), use_bin_type=True)).ndim == 32
    assert _refusal(_array_map("<f4", shape=[*ones, 2])) == f"malformed array shape {[*ones, 2]!r}"
    assert _refusal(_array_map("<f4", data="abcdefgh")) == "array data must be bytes, got str"


def test_messages_are_refused_exactly():
    with pytest.raises(WireFormatError, match=r"^an openpi message is binary, got str$"):
        unpackb("not bytes")
    message = packb({"a": 1})
    assert unpackb(message, max_bytes=len(message)) == {"a": 1}  # a message exactly at the limit is read
    with pytest.raises(WireFormatError, match=rf"^message of {len(message)} bytes exceeds the limit of "
                                              rf"{len(message) - 1}$"):
        unpackb(message, max_bytes=len(message) - 1)
    with pytest.raises(WireFormatError, match=r"^msgpack extension type 5 is not part of the openpi wire format$"):
        unpackb(msgpack.packb(msgpack.ExtType(5, b"x")))
    with pytest.raises(WireFormatError, match=r"^not a valid msgpack message: "):
        unpackb(b"\xc1")  # 0xc1 is never used in msgpack


# ------------------------------------------------------------------ what the client reports, against the stand-in
class ManualClock:
    """The client's back-off clock, moved by the test: back-off is checked without waiting for real time."""

    def __init__(self, now: float = 1000.0):
        self.now = now

    def __call__(self) -> float:
        return self.now


def closed_port() -> int:
    """A loopback port nothing listens on (bound for a moment, then released): connections are refused."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def bounded(call, cap_s: float = 30.0):
    """``call()`` in a helper thread, its result or its exception. The cap is only reached when the code under
    test does not bound its own wait (then the helper thread is left behind, blocked)."""
    outcome: dict = {}

    def run() -> None:
        try:
            outcome["value"] = call()
        except BaseException as exc:  # handed to the test
            outcome["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(cap_s)
    if thread.is_alive():
        raise AssertionError(f"the call did not return within the {cap_s:g} s cap: its own bound did not hold")
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


def client_messages(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "ladder_ros.policies.openpi_remote"]


@pytest.mark.parametrize("metadata, keys", [({"policy": "pi0", "action_horizon": 5}, "policy, action_horizon"),
                                            ({}, "none")])
def test_a_new_client_has_counted_nothing_then_counts_each_connection_and_keeps_the_metadata(
        caplog, metadata, keys):
    clock = ManualClock(0.0)  # at time 0 of its clock nothing is pending: the first request connects at once
    with FakePolicyServer(metadata=metadata) as server:
        client = OpenPIClient(ServerSettings(port=server.port), clock=clock)
        assert (client.connects, client.failures, client.server_errors, client.consecutive_errors) == (0, 0, 0, 0)
        assert (client.last_error, client.last_server_error, client.backoff_s) == ("", "", 0.0)
        assert client.metadata is None and client.error_backoff is False and not client.connected
        assert client.give_up_reason() is None
        caplog.set_level(logging.INFO, logger="ladder_ros.policies.openpi_remote")
        client.ensure_connected()
        assert client.connected and client.metadata == metadata and client.connects == 1
        assert client.connect() == metadata  # a second connection replaces the first, which is closed
        wait_for(lambda: server.closed == 1)
        assert (client.connects, client.failures, server.connections) == (2, 0, 2)
        client.close()
        assert not client.connected
        wait_for(lambda: server.closed == 2)  # the server sees the close
    assert client_messages(caplog) == [f"connected to the policy server at ws://127.0.0.1:{server.port} "
                                       f"(metadata keys: {keys})"] * 2


def test_connect_failures_back_off_doubling_to_the_cap_and_requests_fail_at_once_meanwhile():
    clock = ManualClock()
    port = closed_port()
    client = OpenPIClient(ServerSettings(port=port, backoff_initial_s=0.5, backoff_max_s=3.0), clock=clock)
    for attempt, delay in enumerate(["0.5", "1.0", "2.0", "3.0", "3.0"], 1):  # doubled each time, capped at 3 s
        with pytest.raises(PolicyUnavailable) as caught:
            client.ensure_connected()
        assert re.fullmatch(rf"cannot connect to the policy server at ws://127\.0\.0\.1:{port}: "
                            rf"ConnectionRefusedError: .*[Rr]efused.*; retrying in {delay} s", str(caught.value))
        assert (client.failures, client.connects, client.backoff_s) == (attempt, 0, float(delay))
        assert client.last_error.startswith("cannot connect to the policy server") and client.error_backoff is False
        clock.now += float(delay) - 0.3
        with pytest.raises(PolicyUnavailable, match=r"^not connected \(cannot connect to the policy server at .*\); "
                                                    r"next attempt in 0\.3 s$"):
            client.ensure_connected()  # within the back-off: no attempt, no failure counted
        assert client.failures == attempt
        clock.now += 0.3


def test_a_server_error_after_a_connect_failure_and_a_failure_after_a_server_error_are_told_apart():
    clock = ManualClock()
    answers = iter([RuntimeError("CUDA out of memory")])

    def respond(observation):
        raise next(answers)

    with FakePolicyServer(respond) as server:
        client = OpenPIClient(ServerSettings(port=server.port, backoff_initial_s=0.5), clock=clock)
        with pytest.raises(PolicyServerError):
            client.infer({"n": 1})
        assert client.error_backoff is True
        with pytest.raises(PolicyServerError, match=r"^the policy server failed: RuntimeError: CUDA out of memory; "
                                                    r"next attempt in 0\.5 s$"):
            client.infer({"n": 2})
    clock.now += 0.5  # the server is gone now: the next attempt fails to connect, a missing server again
    with pytest.raises(PolicyUnavailable, match="cannot connect to the policy server"):
        client.infer({"n": 3})
    assert client.error_backoff is False and client.failures == 1 and client.server_errors == 1
    with pytest.raises(PolicyUnavailable, match=r"^not connected \(cannot connect .*\); next attempt in 1\.0 s$"):
        client.infer({"n": 4})


def test_error_replies_are_counted_back_off_across_reconnects_and_end_the_episode_at_the_limit():
    clock = ManualClock()
    answers = iter([RuntimeError("CUDA out of memory")] * 3 + [None, KeyError("observation/image")])

    def respond(observation):
        answer = next(answers)
        if answer is not None:
            raise answer
        return {"actions": np.zeros((5, 7), np.float32)}

    settings = ServerSettings(port=0, backoff_initial_s=0.5, backoff_max_s=1.5, max_consecutive_errors=3)
    with FakePolicyServer(respond) as server:
        client = OpenPIClient(dataclasses.replace(settings, port=server.port), clock=clock)
        oom = "RuntimeError: CUDA out of memory"
        for count, delay in enumerate(["0.5", "1.0", "1.5"], 1):
            with pytest.raises(PolicyServerError) as caught:
                client.infer({"n": count})
            assert str(caught.value) == f"the policy server failed: {oom}; next attempt in {delay} s"
            assert caught.value.signature == oom
            assert (client.server_errors, client.consecutive_errors, client.connects, client.failures) == (
                count, count, count, 0)
            assert client.last_server_error == oom and client.last_error == f"the policy server failed: {oom}"
            assert client.error_backoff is True and not client.connected
            with pytest.raises(PolicyServerError) as caught:
                client.infer({"n": count})  # within the back-off: the same error at once, the server not asked
            assert str(caught.value) == f"the policy server failed: {oom}; next attempt in {delay} s"
            assert caught.value.signature == oom and server.requests == count
            if count < 3:
                assert client.give_up_reason() is None
            clock.now += float(delay)
        assert client.give_up_reason() == f"policy server error: {oom} (3 error replies in a row)"
        assert client.infer({"n": 4}).data["actions"].shape == (5, 7)  # a reply with actions: the run starts over
        assert (client.server_errors, client.consecutive_errors, client.error_backoff) == (3, 0, False)
        assert client.give_up_reason() is None
        with pytest.raises(PolicyServerError, match=r"^the policy server failed: KeyError: 'observation/image'; "
                                                    r"next attempt in 0\.5 s$"):  # the back-off starts over too
            client.infer({"n": 5})
        assert (client.server_errors, client.consecutive_errors) == (4, 1)


def test_an_empty_error_text_is_still_an_error_with_a_signature():
    with FakePolicyServer(lambda observation: "") as server:
        client = OpenPIClient(ServerSettings(port=server.port, backoff_initial_s=0.5))
        with pytest.raises(PolicyServerError, match=r"^the policy server failed: \(empty\); next attempt in 0\.5 s$"):
            client.infer({"n": 1})
    assert client.last_server_error == "(empty)"


@pytest.mark.parametrize("text, signature", [
    ("Traceback (most recent call last):\n  File \"x.py\", line 1\nValueError: bad shape\n\n", "ValueError: bad shape"),
    ("  KeyError: 'prompt'  ", "KeyError: 'prompt'"), ("", "(empty)"), ("\n   \n\t\n", "(empty)")])
def test_the_signature_of_an_error_text_is_its_last_line(text, signature):
    assert traceback_signature(text) == signature


def test_a_late_reply_drops_the_connection_and_the_next_request_reconnects_at_once():
    gate = threading.Event()

    def respond(observation):
        if observation["slow"]:
            gate.wait(10)  # a cap: the test opens the gate as soon as the client has given up on this reply
        return {"actions": np.zeros((5, 7), np.float32)}

    clock = ManualClock()
    with FakePolicyServer(respond) as server:
        client = OpenPIClient(ServerSettings(port=server.port, request_timeout_s=0.2, backoff_initial_s=0.5),
                              clock=clock)
        for bound in (None, 0.15):  # the settings' bound, then a bound for one request (a warm-up's)
            gate.clear()
            try:
                with pytest.raises(PolicyUnavailable) as caught:
                    client.infer({"slow": True}, bound)
            finally:
                gate.set()
            said = "0.2" if bound is None else "0.15"
            assert str(caught.value) == (f"the policy server sent no reply within {said} s; the connection is dropped "
                                         "(a late reply would be read as the next one)")
            assert not client.connected and client.last_error == f"no reply within {said} s"
            # a slow server is not a dead one: the next request reconnects at once (the clock has not moved)
            assert client.infer({"slow": False}).data["actions"].shape == (5, 7)
        assert (client.connects, client.failures, server.connections) == (3, 0, 3)


def test_a_lost_connection_is_a_failure_named_with_the_close():
    answers = iter([{"actions": np.zeros((5, 7))}, DISCONNECT])
    with FakePolicyServer(lambda observation: next(answers)) as server:
        client = OpenPIClient(ServerSettings(port=server.port, backoff_initial_s=0.5), clock=ManualClock())
        client.infer({"n": 1})
        with pytest.raises(PolicyUnavailable) as caught:
            client.infer({"n": 2})
    assert re.fullmatch(rf"lost the policy server at ws://127\.0\.0\.1:{server.port}: ConnectionClosed\w*: .*1000.*; "
                        r"retrying in 0\.5 s", str(caught.value))
    assert (client.failures, client.connects, client.connected) == (1, 1, False)


def test_replies_are_read_as_maps_and_their_timing_keeps_only_numbers():
    actions = np.zeros((5, 7), np.float32)
    answers = iter([
        {"actions": actions},  # the server's own timing
        packb({"actions": actions, "server_timing": {"infer_ms": 3, "prev_total_ms": 2.5, "flag": True, "note": "x"}}),
        packb({"actions": actions, "server_timing": [1.0, 2.0]}),
        packb({"actions": actions}),
        packb([1, 2]),
        b"\xc1",  # never valid msgpack
    ])
    with FakePolicyServer(lambda observation: next(answers)) as server:
        client = OpenPIClient(ServerSettings(port=server.port, backoff_initial_s=0.5), clock=ManualClock())
        first = client.infer({"n": 1})
        assert list(first.server_timing) == ["infer_ms"] and isinstance(first.server_timing["infer_ms"], float)
        timing = client.infer({"n": 2}).server_timing
        assert timing == {"infer_ms": 3.0, "prev_total_ms": 2.5} and all(type(v) is float for v in timing.values())
        assert client.infer({"n": 3}).server_timing == {}
        assert client.infer({"n": 4}).server_timing == {}
        with pytest.raises(PolicyServerError) as caught:
            client.infer({"n": 5})
        assert str(caught.value) == caught.value.signature == "the policy server replied with a list, not a map"
        with pytest.raises(PolicyUnavailable, match=r"^unreadable reply from the policy server: not a valid msgpack "
                                                    r"message: .*; retrying in 0\.5 s$"):
            client.infer({"n": 6})
    assert (client.failures, client.connected) == (1, False)


def test_the_round_trip_is_measured_around_the_exchange(monkeypatch):
    import types

    from ladder_ros.policies import openpi_remote

    ticks = iter(np.arange(1, 100) * 0.125)  # each reading of the timer is 125 ms after the one before
    monkeypatch.setattr(openpi_remote, "time", types.SimpleNamespace(perf_counter=lambda: float(next(ticks))))
    with FakePolicyServer() as server:
        config = config_for(server.port)
        source = OpenPISource(config, client=OpenPIClient(config.server))
        reply = source.client.infer({"n": 1})
        chunk = source.infer(bundle(), "go", 0)
    assert reply.round_trip_ms == pytest.approx(125.0, rel=1e-12)
    assert chunk.latency_s == pytest.approx(0.375, rel=1e-12)  # the source's own start and end, three readings apart


@pytest.mark.parametrize("size, readable", [(500, True), (1500, False)])
def test_messages_over_the_size_limit_are_refused(size, readable):
    limit_mb = 0.001  # 1048 bytes
    with FakePolicyServer(metadata={"blob": "x" * size}) as server:
        client = OpenPIClient(ServerSettings(port=server.port, max_message_mb=limit_mb, backoff_initial_s=0.5),
                              clock=ManualClock())
        if readable:
            assert client.connect() == {"blob": "x" * size}
            assert client.infer({"n": 1}).data["actions"].shape == (5, 7)
        else:
            with pytest.raises(PolicyUnavailable, match=rf"^the policy server at ws://127\.0\.0\.1:{server.port} "
                                                        r"sent no readable metadata: ConnectionClosedError: .*1009"):
                client.connect()
            assert client.failures == 1 and client.metadata is None


def test_metadata_that_is_not_a_map_or_never_comes_is_a_failure():
    for metadata, why in ((packb([1, 2]), "sent metadata that is not a map: bytes"),
                          ("hello", "sent metadata that is not a map: str"),
                          (b"\xc1", "sent no readable metadata: WireFormatError: not a valid msgpack message"),
                          (SILENT, r"sent no readable metadata: TimeoutError: timed out")):
        with FakePolicyServer(metadata=metadata) as server:
            client = OpenPIClient(ServerSettings(port=server.port, connect_timeout_s=0.3, backoff_initial_s=0.5),
                                  clock=ManualClock())
            with pytest.raises(PolicyUnavailable) as caught:
                bounded(client.connect)
            assert str(caught.value).startswith(f"the policy server at ws://127.0.0.1:{server.port} ")
            assert re.search(why, str(caught.value)) and str(caught.value).endswith("; retrying in 0.5 s")
            assert client.failures == 1 and client.connects == 0 and client.metadata is None
            wait_for(lambda: server.closed == 1)  # the client closed that connection


def test_health_checks_ask_healthz_and_are_bounded():
    with FakePolicyServer() as server:
        assert OpenPIClient(ServerSettings(port=server.port)).healthy()
        assert OpenPIClient(ServerSettings(port=server.port)).healthy(timeout_s=5.0)
    with socket.socket() as silent:  # accepts connections (the kernel's backlog) and never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(4)
        port = silent.getsockname()[1]
        assert bounded(lambda: OpenPIClient(ServerSettings(port=port, connect_timeout_s=0.2)).healthy()) is False
        assert bounded(lambda: OpenPIClient(ServerSettings(port=port, connect_timeout_s=600.0)).healthy(
            timeout_s=0.2)) is False


def test_an_api_key_goes_in_the_authorization_header_as_openpi_sends_it(monkeypatch):
    # openpi-client's WebsocketClientPolicy (packages/openpi-client/src/openpi_client/websocket_client_policy.py,
    # commit 04a8d0c9): headers = {"Authorization": f"Api-Key {api_key}"} if api_key else None
    monkeypatch.setenv("LADDER_POLICY_KEY", "s3cret")
    with FakePolicyServer() as server:
        keyed = ServerSettings(port=server.port, api_key_env="LADDER_POLICY_KEY")
        OpenPIClient(keyed).connect()
        OpenPIClient(ServerSettings(port=server.port)).connect()  # no key configured: no header
        for value in (None, ""):  # unset or empty: refused before connecting, naming the variable
            if value is None:
                monkeypatch.delenv("LADDER_POLICY_KEY")
            else:
                monkeypatch.setenv("LADDER_POLICY_KEY", value)
            with pytest.raises(PolicyUnavailable, match=r"^the API key variable LADDER_POLICY_KEY is not set$"):
                OpenPIClient(keyed).connect()
        assert [h.get("Authorization") for h in server.headers] == ["Api-Key s3cret", None]


def test_the_client_connects_directly_and_without_deprecated_calls(monkeypatch):
    for name in ("no_proxy", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
    for name in ("http_proxy", "https_proxy", "ws_proxy"):  # a proxy that refuses everything
        monkeypatch.setenv(name, f"http://127.0.0.1:{closed_port()}")
    with FakePolicyServer() as server:
        client = OpenPIClient(ServerSettings(port=server.port))
        with warnings.catch_warnings():
            warnings.simplefilter("error", DeprecationWarning)  # websockets 17 warns of a connection used unheld
            assert client.connect() == {"fake": True}
            assert client.infer({"n": 1}).data["actions"].shape == (5, 7)


def test_an_error_without_text_is_named_by_its_type():
    from ladder_ros.policies.openpi_remote import _describe

    assert _describe(ConnectionResetError()) == "ConnectionResetError"
    assert _describe(OSError("  ")) == "OSError"
    assert _describe(ValueError(" bad value ")) == "ValueError: bad value"


def test_the_source_sends_the_prompt_passes_its_bound_and_names_a_reply_without_actions():
    gate = threading.Event()

    def respond(observation):
        prompt = observation["prompt"]
        if prompt == "slow":
            gate.wait(10)  # a cap: opened as soon as the client has given up
        if prompt == "nothing":
            return packb({})
        if prompt == "no actions":
            return {"zeta": 1, "alpha": [1.0]}
        if prompt == "a list":
            return {"actions": [[0.0] * 7] * 5}
        return {"actions": np.zeros((5, 7), np.float32)}

    with FakePolicyServer(respond) as server:
        config = config_for(server.port, request_timeout_s=600.0)
        source = OpenPISource(config)
        assert source.name == config.name == "test_bridge"
        chunk = source.infer(bundle(), "put the carrot on the plate", 0)
        assert chunk.actions.shape == (5, 7) and list(chunk.server_timing) == ["infer_ms"]
        assert server.observations[-1]["prompt"] == "put the carrot on the plate"
        try:
            with pytest.raises(PolicyUnavailable, match=r"^the policy server sent no reply within 0\.2 s;"):
                source.infer(bundle(), "slow", 0, timeout_s=0.2)
        finally:
            gate.set()
        for prompt, keys in (("no actions", "alpha, server_timing, zeta"), ("a list", "actions, server_timing"),
                             ("nothing", "none")):
            with pytest.raises(PolicyServerError) as caught:
                source.infer(bundle(), prompt, 0)
            assert str(caught.value) == f"the policy server's reply has no 'actions' array (keys: {keys})"
            assert caught.value.signature == str(caught.value)
        source.close()
        assert not source.client.connected
    with pytest.raises(LadderError, match=r"^policy test_bridge has no server settings$"):
        OpenPISource(dataclasses.replace(config, server=None))


def test_a_connection_its_owner_closed_is_reopened_at_once_even_after_an_earlier_failure():
    # A warm-up retries connect() itself: a failure schedules a back-off, the warm-up's own connect() then
    # succeeds before it has passed. Once that connection is closed by its owner, the stale back-off of a
    # failure the connection has since disproved holds nothing back.
    clock = ManualClock(0.0)
    with FakePolicyServer() as server:
        port = server.port
        client = OpenPIClient(ServerSettings(port=port, backoff_initial_s=0.5), clock=clock)
        server.stop()
        with pytest.raises(PolicyUnavailable, match="cannot connect"):
            client.connect()
    with FakePolicyServer(port=port) as server:
        clock.now = 0.1
        assert client.connect() == {"fake": True} and client.last_error == ""
        client.close()
        assert client.infer({"n": 1}).data["actions"].shape == (5, 7)  # reconnected at once, at 0.1 s
        assert (client.connects, client.failures, server.connections) == (2, 1, 2)
