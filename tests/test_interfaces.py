"""The graph's own messages (ladder_ros_interfaces): exact round trips, clear refusals, and recordings that tools
without the project read field by field; recordings made before them still give the same report.

* Every document of a recorded episode (the fixture, recorded in the JSON-in-String format) goes to its typed
  message, through CDR and back, and comes out equal: the typed interfaces carry everything the JSON did.
* A bad value is refused with one :class:`SchemaError` naming the message and the field.
* An episode recorded by the graph decodes, every topic and every message, with ``mcap_ros2`` in a process
  that cannot import ladder_ros (the definitions come from the file), field for field the same as ``rosbags``
  reads them, and the project's documents rebuilt from either decoder are equal.
* ``report`` and the export's frame reader give, on the old-format fixture, exactly what they gave before.
"""

import dataclasses
import json
import math
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

pytest.importorskip("rclpy", reason="needs the ROS 2 wheels (requirements/ros.txt)")
pytest.importorskip("ladder_ros_interfaces", reason="needs the interface package (scripts/build_interfaces.sh)")

import rclpy  # noqa: E402
from ladder_ros_interfaces.msg import Subgoal  # noqa: E402
from rclpy.executors import SingleThreadedExecutor  # noqa: E402
from rclpy.serialization import deserialize_message, serialize_message  # noqa: E402

from ladder_ros.core.events import EVENT_KINDS  # noqa: E402
from ladder_ros.interface_conversions import (  # noqa: E402
    DOCUMENT_OF_TYPE,
    EVENT_FIELDS,
    document_from_msg,
    document_to_msg,
    message_type,
    recorded_document,
    type_name,
)
from ladder_ros.messages import (  # noqa: E402
    DOCUMENTS,
    EpisodeEventDoc,
    EpisodeLabels,
    EpisodeScoreDoc,
    EpisodeStatus,
    PlanRequestDoc,
    PlanResultDoc,
    SafetyInterventionDoc,
    SchemaError,
    VerificationResultDoc,
)
from ladder_ros.specs import topics  # noqa: E402
from ladder_ros.policies.status import PolicyStatusDoc  # noqa: E402
from ladder_ros.recording.bag import read_bag  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
LEGACY = REPO / "tests" / "fixtures" / "legacy_json_recording"
PEER = REPO / "tests" / "mcap_ros2_peer.py"


def legacy_bag() -> Path:
    return next(p for p in LEGACY.iterdir() if p.is_dir())


def recorded_documents(bag: Path) -> list[tuple[str, object]]:
    """(topic, document) of every message of ``bag`` on a topic that carries one of the graph's documents."""
    by_suffix = {"/" + spec.name: DOCUMENT_OF_TYPE[spec.type] for spec in topics.TOPICS
                 if spec.type in DOCUMENT_OF_TYPE}
    summary, _ = read_bag(bag)
    wanted = {t: next(c for s, c in by_suffix.items() if t.endswith(s)) for t in summary.topics
              if any(t.endswith(s) for s in by_suffix)}
    _, decoded = read_bag(bag, wanted)
    return [(topic, recorded_document(m, wanted[topic])) for topic in wanted for m in decoded[topic]]


def cdr_round_trip(document):
    cls = type(document)
    return document_from_msg(deserialize_message(serialize_message(document_to_msg(document)), message_type(cls)),
                             cls)


# ------------------------------------------------------------------------------ round trips
def test_every_document_type_has_a_message_and_a_topic():
    carried = {cls for cls in DOCUMENT_OF_TYPE.values()}
    assert carried == {*DOCUMENTS, PolicyStatusDoc}
    assert {spec.type for spec in topics.TOPICS if spec.type.startswith("ladder_ros_interfaces/")} == \
        {type_name(cls) for cls in carried}


def test_every_recorded_document_survives_its_typed_message_exactly():
    documents = recorded_documents(legacy_bag())
    kinds = {type(d) for _, d in documents}
    assert len(kinds) >= 12, kinds  # status, command, reply, privileged, policy status, gripper, decision, events,
    for topic, document in documents:  # tags, verification request and result, score, labels
        assert cdr_round_trip(document) == document, topic


def test_documents_the_fixture_lacks_round_trip_too():
    usage = {"model": "gemini-2.5-flash", "input_tokens": 1290, "output_tokens": 12, "thinking_tokens": None,
             "cost_usd": 0.00041, "cost_unknown": None, "attempts": 2, "finish_reason": "STOP", "failure": None}
    plan = [{"object": "carrot", "destination": "plate", "text": "put the carrot on the plate"}]
    for document in (
            PlanRequestDoc(episode_id="e", step=0, stamp_ns=12, instruction="put everything on the plate"),
            PlanResultDoc(episode_id="e", subgoals=plan, raw_reply='{"subtasks": ["..."]}', source="gemini",
                          latency_ms=812.5, usage=usage),
            PlanResultDoc(episode_id="e", subgoals=None, error="no JSON in the reply", raw_reply="I cannot",
                          source="gemini"),
            PlanResultDoc(episode_id="e", subgoals=[], error=None, source="gemini"),
            SafetyInterventionDoc(episode_id="e", step=4, source="sim_bridge", kind="workspace_clip", reason="z",
                                  axis="z", value=-0.1, limit=0.02, counts={"workspace_clip": 2, "rejected": 1}),
            SafetyInterventionDoc(episode_id="e", step=4, source="widowx_driver", kind="rejected",
                                  reason="non-finite action nan", value=math.inf),
            VerificationResultDoc(episode_id="e", step=9, result={
                "request_id": 3, "count": None, "source": "gemini", "raw_reply": "two?", "error": "no count",
                "latency_ms": 1.5, "usage": usage}),
            EpisodeLabels(episode_id="e", revision=3, subgoals={"0": "done", "2": "not_done"}, episode=None,
                          note="", operator="ana", final=False, updated_unix_s=3.25, history=[
                              {"revision": 1, "unix_s": 1.0, "what": "subgoal 0", "value": "done"},
                              {"revision": 2, "unix_s": 2.0, "what": "note", "value": ""},
                              {"revision": 3, "unix_s": 3.25, "what": "final", "value": False}]),
            PolicyStatusDoc(policy="p", state="warming up", detail="connecting", warm_up_s=None, elapsed_s=1.0,
                            deadline_s=60.0),
            # The WidowX twin's score (the rehearsal): its own report, no bridge timing, no safety filter of its own.
            EpisodeScoreDoc(episode_id="e", step=88, score={
                "success": False, "subgoals_done": 1, "violations": [], "steps_used": 88, "simulator": "widowx_twin",
                "success_rule": "all_subgoals", "final_goal": {"resting": [["carrot", "plate", 1]], "held": []},
                "subgoals": [{"index": 0, "text": "put the carrot on the plate", "done": True, "cause": None,
                              "first_done_step": 40}],
                "twin": {"physics_skipped_s": 0.25, "camera": {
                    "frames": 310, "late": 2, "channel": "ladder_widowx_camera", "render_p50_ms": 11.5,
                    "render_max_ms": None, "error": ""}}})):
        assert cdr_round_trip(document) == document, document


def test_each_event_kind_round_trips_with_its_own_fields():
    assert set(EVENT_FIELDS) == set(EVENT_KINDS)
    samples = {"plan_index": 1, "request_id": 2, "text": "put the carrot on the plate", "object": "carrot",
               "destination": "plate", "reason": "after_release", "close_steps": 4, "lift_m": 0.031, "count": None,
               "required": 2, "complete": False, "verified": True, "by": "verifier", "source": "oracle",
               "error": "timeout", "variant": "proprio_verifier", "preset": "widowx", "instruction": "tidy up",
               "plan": ["a", "b"], "budget_steps": 200, "completed": [0], "advanced": [], "pending": [1, 2]}
    for i, (kind, names) in enumerate(EVENT_FIELDS.items()):
        event = {"step": 10 + i, "kind": kind, **{n: samples[n] for n in names}}
        doc = EpisodeEventDoc(episode_id="e", index=i, event=event)
        assert cdr_round_trip(doc) == doc
    no_lift = EpisodeEventDoc(episode_id="e", index=0, event={"step": 1, "kind": "attempt_ended", "reason": "timeout",
                                                              "close_steps": 0})
    assert cdr_round_trip(no_lift) == no_lift  # absent stays absent


# ------------------------------------------------------------------------------ refusals
def _status_msg(**fields):
    msg = document_to_msg(EpisodeStatus(episode_id="e", state="running"))
    for name, value in fields.items():
        setattr(msg, name, value)
    return msg


@pytest.mark.parametrize("fields, named", [
    ({"schema_version": 2}, "unsupported schema_version 2"),
    ({"state": "paused"}, "unknown state 'paused'"),
    ({"clock": "sundial"}, "unknown clock 'sundial'"),
    ({"plan_index": -2}, "'plan_index' must be >= 0 or -1"),
    ({"step": -5}, "'step' must be >= -1"),
    ({"record_json": "{not json"}, "record_json is not valid JSON"),
])
def test_a_bad_field_is_refused_naming_the_message_and_the_field(fields, named):
    with pytest.raises(SchemaError, match="episode_status") as info:
        document_from_msg(_status_msg(**fields), EpisodeStatus)
    assert named in str(info.value)


def test_bad_payloads_are_refused_where_they_enter():
    msg = document_to_msg(VerificationResultDoc(episode_id="e", step=1, result={
        "request_id": 0, "count": 2, "source": "oracle", "raw_reply": None, "error": None, "latency_ms": 0.0,
        "usage": {}}))
    msg.count = -7
    with pytest.raises(SchemaError, match="verification_result: field 'count' must be >= 0 or -1"):
        document_from_msg(msg, VerificationResultDoc)
    event = document_to_msg(EpisodeEventDoc(episode_id="e", index=0, event={"step": 0, "kind": "subgoal_completed",
                                                                            "plan_index": 0, "by": "verifier"}))
    event.kind = "subgoal_celebrated"
    with pytest.raises(SchemaError, match="unknown event kind 'subgoal_celebrated'"):
        document_from_msg(event, EpisodeEventDoc)
    with pytest.raises(SchemaError, match="a subgoal_completed event has a field the message does not carry: 'mood'"):
        document_to_msg(EpisodeEventDoc(episode_id="e", index=0, event={
            "step": 0, "kind": "subgoal_completed", "plan_index": 0, "by": "verifier", "mood": "happy"}))
    with pytest.raises(SchemaError, match="twin.camera has a field the message does not carry: 'fps'"):
        document_to_msg(EpisodeScoreDoc(episode_id="e", step=1, score={
            "success": True, "subgoals_done": 0, "twin": {"camera": {"fps": 30}}}))
    with pytest.raises(SchemaError, match="both steps_taken and bridge_timing_s"):
        document_to_msg(EpisodeScoreDoc(episode_id="e", step=1, score={"success": True, "subgoals_done": 0,
                                                                       "steps_taken": 3}))
    with pytest.raises(SchemaError, match="usage has a field the message does not carry: 'tokens'"):
        document_to_msg(PlanResultDoc(episode_id="e", subgoals=None, usage={"tokens": 3}))
    plan = document_to_msg(PlanResultDoc(episode_id="e", subgoals=None, error="none"))
    plan.subgoals = [Subgoal(object="carrot", destination="plate", text="put the carrot on the plate")]
    with pytest.raises(SchemaError, match="plan_result: a result without a plan"):
        document_from_msg(plan, PlanResultDoc)
    labels = document_to_msg(EpisodeLabels(episode_id="e", revision=1, final=True, history=[
        {"revision": 1, "unix_s": 1.0, "what": "final", "value": True}]))
    labels.history[0].value = "maybe"
    with pytest.raises(SchemaError, match="a 'final' change has the value true or false, got 'maybe'"):
        document_from_msg(labels, EpisodeLabels)
    labels.history[0].value = "true"
    labels.episode = "triumph"
    with pytest.raises(SchemaError, match="episode label must be one of success, failure, partial"):
        document_from_msg(labels, EpisodeLabels)


def test_reading_is_by_field_name_so_decoded_recordings_need_no_rclpy():
    status = EpisodeStatus(episode_id="e", state="finished", task={"task_id": "t"}, plan=[], origin_ns=5,
                           result={"success": True})
    msg = document_to_msg(status)
    as_namespace = json.loads(json.dumps(_plain(msg)), object_hook=lambda d: SimpleNamespace(**d))
    assert recorded_document(as_namespace, EpisodeStatus).result == {"success": True}


# ------------------------------------------------------------------------------ recordings
def _plain(value):
    """A message of rclpy or rosbags as plain values, keyed by field name (``uint8[]`` as hex, as the peer does)."""
    if isinstance(value, (bytes, bytearray)):
        return value.hex()
    if hasattr(value, "tolist") and not isinstance(value, (int, float)):
        value = value.tolist()
        if isinstance(value, list) and value and isinstance(value[0], int) and not isinstance(value[0], bool):
            return value
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if hasattr(value, "get_fields_and_field_types"):  # rclpy
        return {name: _plain(getattr(value, name)) for name in value.get_fields_and_field_types()}
    if dataclasses.is_dataclass(value):  # rosbags; constants (upper case, as rosidl requires) are not fields
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)
                if f.name != "__msgtype__" and not f.name.isupper()}
    return value


def _same(a, b, where=""):
    """Field by field; NaN equals NaN (the sentinel of an optional float)."""
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return
    if isinstance(a, dict) and isinstance(b, dict):
        assert set(a) == set(b), f"{where}: fields {sorted(a)} != {sorted(b)}"
        for key in a:
            _same(a[key], b[key], f"{where}.{key}")
        return
    if isinstance(a, list) and isinstance(b, list):
        assert len(a) == len(b), f"{where}: {len(a)} != {len(b)} elements"
        for i, (x, y) in enumerate(zip(a, b)):
            _same(x, y, f"{where}[{i}]")
        return
    if isinstance(b, str) and isinstance(a, list) and all(isinstance(v, int) for v in a):
        a = bytes(a).hex()  # uint8[] as rosbags reads it
    assert a == b, f"{where}: {a!r} != {b!r}"


@pytest.fixture(scope="module")
def typed_recording(tmp_path_factory):
    """One episode of the graph (all nodes in one executor, the built-in tabletop, 16 px renders) recorded by the
    episode recorder, with the operator's labels."""
    pytest.importorskip("mujoco", reason="the graph runs the built-in MuJoCo tabletop")
    from ladder_ros.bringup.client import EpisodeClient
    from ladder_ros.runtime.endpoints import message_class, publisher
    from ladder_ros.panel import labels as label_ops
    from tests.recording_graph import close_graph, recording_graph_nodes

    out = tmp_path_factory.mktemp("typed")
    rclpy.init()
    ns = "typed"
    nodes = recording_graph_nodes(ns, out, image_size=16)
    client = EpisodeClient(namespace=ns)
    labels_pub = publisher(client, message_class(topics.LABELS), topics.LABELS)
    executor = SingleThreadedExecutor()
    for node in [*nodes, client]:
        executor.add_node(node)
    try:
        client.wait_for_graph(executor, timeout_s=60)
        outcome = client.run_episode(executor, "kitchen_single_2", variant="proprio_verifier", layout=0, seed=0,
                                     timeout_s=300)
        labels = label_ops.label_subgoal(EpisodeLabels(episode_id=outcome.episode_id), 0, "done", 1.0)
        labels_pub.publish(document_to_msg(label_ops.set_final(labels, True, 2.0)))
        recorder = nodes[-1]
        client.spin_until(executor, lambda: len(recorder.closed) == 1, 60, "the recording to close")
    finally:
        close_graph(executor, [*nodes, client])
    return Path(recorder.closed[0]), outcome


def test_mcap_ros2_decodes_every_topic_without_the_project(typed_recording):
    bag, outcome = typed_recording
    mcap_file = next(bag.glob("*.mcap"))
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "LD_LIBRARY_PATH", "AMENT_PREFIX_PATH")}
    run = subprocess.run([sys.executable, "-I", str(PEER), str(mcap_file)], capture_output=True, text=True,
                         env=env, cwd=str(bag), timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    peer = json.loads(run.stdout)
    assert peer["loaded"] == []
    summary, decoded = read_bag(bag, read_bag(bag)[0].topics)
    assert set(peer["topics"]) == set(summary.topics)
    own = {spec.type for spec in topics.TOPICS if spec.type.startswith("ladder_ros_interfaces/")}
    seen = {entry["schema"] for entry in peer["topics"].values()}
    assert own - seen <= {"ladder_ros_interfaces/msg/PlanRequest", "ladder_ros_interfaces/msg/PlanResult",
                          "ladder_ros_interfaces/msg/SafetyIntervention"}, own - seen  # none in this episode
    for topic, entry in peer["topics"].items():
        assert entry["encoding"] == "ros2msg"
        messages = decoded[topic]
        assert len(entry["messages"]) == len(messages), topic
        cls = DOCUMENT_OF_TYPE.get(entry["schema"])
        for i, (theirs, ours) in enumerate(zip(entry["messages"], messages)):
            _same(_plain(ours), theirs, f"{topic}[{i}]")
            if cls is not None:  # the project's document, rebuilt from what the peer decoded, is the same
                peer_msg = json.loads(json.dumps(theirs), object_hook=lambda d: SimpleNamespace(**d))
                assert recorded_document(peer_msg, cls) == recorded_document(ours, cls), f"{topic}[{i}]"
    finals = [m for m in peer["topics"][f"/typed/{topics.EPISODE_STATUS.name}"]["messages"] if m["record_json"]]
    assert json.loads(finals[-1]["record_json"]) == outcome.result


def test_the_bag_carries_the_definitions_the_nodes_speak(typed_recording):
    from mcap.reader import make_reader

    bag, _ = typed_recording
    with open(next(bag.glob("*.mcap")), "rb") as stream:
        schemas = {s.name: s.data.decode() for s in make_reader(stream).get_summary().schemas.values()}
    status = schemas["ladder_ros_interfaces/msg/EpisodeStatus"]
    assert "string record_json" in status and "MSG: ladder_ros_interfaces/Task" in status
    assert "ladder_ros_interfaces/msg/PrivilegedState" in schemas


def test_the_installed_definitions_are_the_sources_and_in_the_ament_index(monkeypatch):
    """What ``ros2 interface list/show`` read: the package's entry in the ament index's ``rosidl_interfaces``
    resource, and each definition under its share folder, the same text as the sources. Where ros2cli has the
    ``interface`` verb (a ROS install; the vendored ros2cli here has only ``launch`` and ``pkg``), the command
    itself shows one."""
    from ament_index_python.packages import get_package_share_directory, get_resource

    # the prefix path as sourcing a ROS workspace, or activating the venv, sets it
    prefixes = [sys.prefix, *filter(None, os.environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep))]
    monkeypatch.setenv("AMENT_PREFIX_PATH", os.pathsep.join(prefixes))
    content, _ = get_resource("rosidl_interfaces", "ladder_ros_interfaces")
    listed = {line.strip() for line in content.splitlines() if line.strip().endswith(".msg")}
    sources = sorted((REPO / "interfaces" / "ladder_ros_interfaces" / "msg").glob("*.msg"))
    assert listed == {f"msg/{p.name}" for p in sources}
    share = Path(get_package_share_directory("ladder_ros_interfaces"))
    for source in sources:
        assert (share / "msg" / source.name).read_text() == source.read_text(), source.name
    ros2 = Path(sys.executable).parent / "ros2"
    verbs = subprocess.run([str(ros2), "--help"], capture_output=True, text=True, timeout=60) if ros2.exists() else None
    if verbs is not None and " interface " in verbs.stdout:
        shown = subprocess.run([str(ros2), "interface", "show", "ladder_ros_interfaces/msg/GripperEvents"],
                               capture_output=True, text=True, timeout=60, env=dict(os.environ))
        assert shown.returncode == 0, shown.stderr
        assert "AttemptEnd[<=1] attempt_end" in shown.stdout and "\tfloat64 lift_m" in shown.stdout


# ------------------------------------------------------------------------------ recordings made before
def test_report_and_frames_of_a_recording_made_before_are_unchanged():
    """The fixture was recorded with each document as JSON in a std_msgs/String; ``expected.json`` is what the
    report, the labels, the VLM calls and the export's frame reader gave on it before the typed interfaces."""
    import numpy as np

    from ladder_ros.evaluation.lerobot_export import read_frames
    from ladder_ros.evaluation.recorded_episodes import load_episodes
    from ladder_ros.evaluation.report_statistics import build_report

    expected = json.loads((LEGACY / "expected.json").read_text())
    episodes = load_episodes(LEGACY)
    assert len(episodes) == 1
    frames = read_frames(episodes[0])
    now = {"report": build_report(episodes), "labels": episodes[0].labels.to_dict(),
           "vlm_calls": episodes[0].vlm_calls,
           "frames": {"fps": frames.fps, "n": len(frames.actions), "filled": frames.filled, "task": frames.task,
                      "instructions": frames.instructions, "plan_indices": frames.plan_indices,
                      "actions_sum": float(np.sum(frames.actions)), "states_sum": float(np.sum(frames.states)),
                      "poses_sum": float(np.sum(frames.poses)),
                      "images_sum": int(np.sum([i.astype(np.int64).sum() for i in frames.images]))}}
    assert json.loads(json.dumps(now, sort_keys=True, default=str)) == expected
