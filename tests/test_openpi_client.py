"""The openpi protocol client, proven against openpi-client itself (its own msgpack_numpy and websocket client,
running in a separate numpy<2 environment), and against a misbehaving peer: wrong action dimension, NaN,
out-of-bounds actions, a server error, a disconnect mid-episode, slow replies and no server at all give clear
errors, reconnects with back-off, and a robot that holds still. Everything binds 127.0.0.1."""

import json
import select
import subprocess
import time
from pathlib import Path

import msgpack
import numpy as np
import pytest

from ladder_ros.policies.chunked import ChunkedPolicy
from ladder_ros.policies.config import ServerSettings
from ladder_ros.policies.executor import ChunkExecutor
from ladder_ros.policies.fake_server import DISCONNECT, FakePolicyServer
from ladder_ros.policies.openpi_remote import OpenPIClient, OpenPISource, PolicyServerError, PolicyUnavailable
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
    assert any(m.startswith("holding still: no policy server: lost the policy server") for m in messages)
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
