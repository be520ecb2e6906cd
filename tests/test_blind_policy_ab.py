"""Blind A/B sessions between two policies the graph serves: the plan, and what the operator sees.

The plan's ``compare: {policy: [a, b]}`` (with variant cells: a 2 x 2 whose pairs never mix variants) and its
checks. Then a session of two pairs with the panel offscreen (pytest-qt) against a scripted orchestrator that
names the policy, its config path and its digest everywhere it can (statuses, messages, a refused start, events,
the verifier's reply, error lines, the policy node's status, the records): a scan of everything the panel showed
(every widget's text and tooltip, the table, the event log), of what the panel process printed and of every file
it wrote finds neither policy's name, config or digest until the session closes; each episode's start command
names its policy; the sealed key names each arm's policy, config and digest; the report ranks the two by config.
"""

import os
import queue

import pytest

from ladder_ros.core.errors import ConfigError
from ladder_ros.panel.blind import SEALED, SessionSecrets
from ladder_ros.panel.evaluation_plan import EvaluationPlan, pair_orders

POLICIES = {  # name -> (config path, config digest): the config's file name differs from the name
    "steady_v3": ("/labs/ckpts/bridge_steady_v3_bf16.yaml", "1a2b3c4d5e6f7081"),
    "shaky_v1": ("/labs/ckpts/bridge_shaky_v1.yaml", "8899aabbccddeeff"),
}
NAMES = tuple(POLICIES)


def plan_data(**compare):
    return {"schema_version": 1, "name": "ckpt_day", "episodes": 2, "seed": 3, "order_seed": 11,
            "compare": compare or {"policy": list(NAMES)}, "tasks": [{"task": "t2"}]}


# ------------------------------------------------------------------ the plan
def test_a_plan_compares_two_policies_in_pairs_whose_commands_name_them():
    plan = EvaluationPlan.parse(plan_data())
    assert plan.blind and plan.compares_policies and plan.compared_policies == NAMES
    assert plan.systems == ({"variant": "proprio_verifier", "policy": NAMES[0]},
                            {"variant": "proprio_verifier", "policy": NAMES[1]})
    orders = pair_orders(11, 2)  # one cell: the same orders as a comparison of variants
    for number, arms in plan.pairs.items():
        a, b = arms["A"], arms["B"]
        assert (a.task_id, a.layout, a.seed, a.variant) == (b.task_id, b.layout, b.seed, b.variant)
        assert [a.policy, b.policy] == [NAMES[i] for i in orders[number]]
        assert not any(name in a.key + b.key + str(a.to_dict()) for name in NAMES)  # what records keep of it
    assert plan.check_policies(["shaky_v1", "steady_v3", "other"]) is None


def test_policy_by_variant_cells_pair_the_policies_within_each_variant():
    plan = EvaluationPlan.parse({**plan_data(policy=list(NAMES), variant=["proprio_verifier", "periodic_trigger"]),
                                 "episodes": 4, "tasks": [{"task": "t2"}, {"task": "t3", "layouts": 3}]})
    assert len(plan.pairs) == 2 * 4 * 2 and len(plan.entries) == 32
    assert [(s["policy"], s["variant"]) for s in plan.systems] == [
        (NAMES[0], "proprio_verifier"), (NAMES[1], "proprio_verifier"),
        (NAMES[0], "periodic_trigger"), (NAMES[1], "periodic_trigger")]
    first = {"proprio_verifier": [], "periodic_trigger": []}
    for arms in plan.pairs.values():
        a, b = arms["A"], arms["B"]
        assert a.variant == b.variant and {a.policy, b.policy} == set(NAMES)  # a pair never mixes variants
        assert (a.task_id, a.layout, a.seed) == (b.task_id, b.layout, b.seed) and a.index + 1 == b.index
        first[a.variant].append(a.policy)
    for variant, policies in first.items():  # counterbalanced within each cell
        assert policies.count(NAMES[0]) == policies.count(NAMES[1]) == 4, variant
    # the task's episodes and cells: episode k of t3 meets layout k mod 3 in both cells
    t3 = [arms["A"] for arms in plan.pairs.values() if arms["A"].task_id == "t3"]
    assert [(e.episode, e.layout, e.variant) for e in t3][:4] == [
        (0, 0, "proprio_verifier"), (0, 0, "periodic_trigger"), (1, 1, "proprio_verifier"),
        (1, 1, "periodic_trigger")]


def test_two_variants_under_one_policy_keep_the_policy_in_the_open():
    plan = EvaluationPlan.parse(plan_data(variant=["proprio_verifier", "periodic_trigger"], policy="steady_v3"))
    assert {e.policy for e in plan.entries} == {"steady_v3"} and not plan.compares_policies
    assert {e.variant for e in plan.entries} == {"proprio_verifier", "periodic_trigger"}
    listed = EvaluationPlan.parse(plan_data() | {"compare": [{"policy": "steady_v3", "variant": "periodic_trigger"},
                                                             {"policy": "shaky_v1"}]})
    assert listed.compared_policies == NAMES and {e.variant for e in listed.entries} == {
        "periodic_trigger", "proprio_verifier"}


@pytest.mark.parametrize("data,served,match", [
    (plan_data(), ["steady_v3", "other"], r"names the policy 'shaky_v1', which the graph does not serve; it serves: "
                                          r"steady_v3, other"),
    (plan_data(policy=["steady_v3", "steady_v3"]), None, "lists a name twice"),
    (plan_data(policy=["steady_v3", "B"]), None, "cannot be named 'B'"),
    (plan_data(policy=["steady_v3", "shaky v1"]), None, "must be 1-64 characters"),
    (plan_data(policy=["a", "b", "c"]), None, "compares two policies"),
    (plan_data(policy=list(NAMES), colour="red"), None, "unknown key 'colour'"),
    (plan_data(policy=list(NAMES), variant=["fastest"]), None, "fastest"),
    (plan_data() | {"name": "steady_v3_vs_shaky"}, None, "names the compared policy 'steady_v3'"),
    (plan_data() | {"tasks": [{"task": "shaky_v1_table"}]}, None, "names the compared policy 'shaky_v1'"),
    (plan_data(policy=["steady_v3", "v1"]), None, "at least 3 characters"),
    (plan_data() | {"compare": [{"policy": "steady_v3"}, {"variant": "periodic_trigger"}]}, None,
     "names the policy of both systems"),
])
def test_bad_policy_comparisons_are_refused_naming_the_problem(data, served, match):
    with pytest.raises(ConfigError, match=match):
        EvaluationPlan.parse(data, served_policies=served)


def test_secrets_are_found_wherever_they_stand_and_redacted_until_revealed():
    secrets = SessionSecrets(["low"])
    secrets.learn("low", "/runs/x/policies/cfg_7.yaml", "0123456789abcdef")
    line = "policy low (01234567) from /runs/x/policies/cfg_7.yaml; see cfg_7.yaml, slow"
    assert secrets.found(line) == ["low", "01234567", "/runs/x/policies/cfg_7.yaml", "cfg_7.yaml"]
    assert secrets.redact(line) == f"policy {SEALED} ({SEALED}) from {SEALED}; see {SEALED}, s{SEALED}"
    doc = {"episode_id": "day-low-1", "variant": "periodic_trigger", "policy": "low", "message": "low warming up",
           "result": {"policy_report": {"config": "cfg_7", "config_hash": "0123456789abcdef"}, "n": 3}}
    assert secrets.mask(doc, "B") == {"episode_id": "day-low-1", "variant": "B", "policy": "B",
                                      "message": f"{SEALED} warming up",
                                      "result": {"policy_report": {"config": "B", "config_hash": "B"}, "n": 3}}
    secrets.reveal()
    assert secrets.redact(line) == line and secrets.mask(doc, "B") is doc


# ------------------------------------------------------------------ a session with the panel offscreen
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
os.environ.setdefault("XDG_RUNTIME_DIR", f"/tmp/ladder-qt-{os.getuid()}")
os.makedirs(os.environ["XDG_RUNTIME_DIR"], mode=0o700, exist_ok=True)


class LeakyOrchestrator:
    """The panel's outbox and bridge, and an orchestrator and policy node that name the policy wherever they can."""

    def __init__(self):
        self.inbox = queue.SimpleQueue()
        self.commands, self.labels = [], []
        self.refused_once = False

    # the panel's outbox
    def send_command(self, command):
        self.commands.append(command)

    def publish_labels(self, labels):
        self.labels.append(labels)

    def call_trigger(self, service):
        return False

    def call_arm(self, arm):
        return False

    def service_ready(self, service):
        return False

    def latest_image(self):
        return None

    def latest_depth(self):
        return None

    # the graph's side
    def policy_status(self):
        from ladder_ros.policies.status import PolicyStatusDoc

        entries = [{"name": n, "config": c, "config_hash": h, "state": "ready", "detail": f"serving {c} as {n}",
                    "warm_up_s": 1.5} for n, (c, h) in POLICIES.items()]
        return PolicyStatusDoc(policy=NAMES[0], state="ready", config_hash=POLICIES[NAMES[0]][1],
                               default_policy=NAMES[0], policies=entries)

    def status(self, command, state="running", result=None, finish_reason=None):
        from ladder_ros.messages import EpisodeStatus

        config, digest = POLICIES[command.policy]
        return EpisodeStatus(
            episode_id=command.episode_id, state=state, task={"task_id": "t2", "instruction": "put both"},
            variant=command.variant, policy=command.policy, policy_config_hash=digest, layout=command.layout,
            seed=command.seed, plan=[{"object": "carrot", "destination": "plate", "text": "carrot on plate"}],
            budget_steps=100, rate_hz=5.0, step=7, plan_index=0 if state == "running" else None,
            message=f"policy {command.policy} ({digest[:8]}) from {config}", finish_reason=finish_reason,
            result=result)

    def play(self, widget, success):
        """Answer the start just sent: refuse the first one, then run the episode to its end."""
        from ladder_ros.core import events as ev
        from ladder_ros.messages import EpisodeCommandReply, EpisodeEventDoc, VerificationResultDoc

        command = self.commands[-1]
        name, (config, digest) = command.policy, POLICIES[command.policy]
        if not self.refused_once:
            self.refused_once = True
            self.inbox.put(("reply", EpisodeCommandReply(
                command="start", episode_id=command.episode_id, accepted=False,
                reason=f"the policy {name!r} is not ready: warming up: loading {config} ({digest})")))
            return False
        self.inbox.put(("status", self.status(command)))
        self.inbox.put(("event", EpisodeEventDoc(episode_id=command.episode_id, index=0, event={
            "step": 0, "kind": ev.EPISODE_STARTED, "variant": command.variant, "policy": name, "preset": "widowx"})))
        self.inbox.put(("event", EpisodeEventDoc(episode_id=command.episode_id, index=1, event={
            "step": 9, "kind": ev.ATTEMPT_ENDED, "reason": f"release ({name} let go)", "close_steps": 4})))
        self.inbox.put(("event", EpisodeEventDoc(episode_id=command.episode_id, index=2, event={
            "step": 14, "kind": ev.VERIFICATION_ANSWERED, "request_id": 1, "plan_index": 0, "count": int(success),
            "required": 1, "complete": success, "source": "vlm", "error": None})))
        self.inbox.put(("verdict", VerificationResultDoc(episode_id=command.episode_id, step=14, result={
            "request_id": 1, "count": int(success), "source": "vlm", "raw_reply": f"{int(success)} carrot (the arm "
            f"of {name})", "error": None, "latency_ms": 900.0, "usage": {}})))
        self.inbox.put(("error", f"ignoring a malformed action tag of {name} ({config})"))
        self.inbox.put(("policy_status", self.policy_status()))
        result = {"episode_id": command.episode_id, "task_id": "t2", "variant": command.variant, "policy": name,
                  "policy_config_hash": digest, "success": success, "scored": True, "horizon": 1,
                  "subgoals_done": int(success), "finish_reason": "plan_complete" if success else "budget_exhausted",
                  "category": "c", "subgoals": [], "steps_used": 40, "budget_steps": 100, "events": [],
                  "policy_report": {"policy": name, "config": config, "config_hash": digest, "final": True}}
        self.inbox.put(("status", self.status(command, "finished", result, result["finish_reason"])))
        return True


def test_nothing_the_panel_shows_prints_or_writes_names_a_policy_until_the_session_closes(qtbot, tmp_path, capfd):
    pytest.importorskip("pytestqt", reason="needs pytest-qt and PyQt5 (requirements/operator.txt)")
    from python_qt_binding.QtCore import Qt
    from python_qt_binding.QtWidgets import QApplication

    from ladder_ros.evaluation.recorded_episodes import ab_keys, ab_pairs, load_episodes
    from ladder_ros.evaluation.report_statistics import build_report
    from ladder_ros.messages import EpisodeStatus
    from ladder_ros.panel.ab_session import ABSessionStore, read_key
    from ladder_ros.panel.app import parse_plugin_args, startup_line
    from ladder_ros.panel.controller import PanelController
    from ladder_ros.panel.records import EpisodeRecordStore
    from ladder_ros.panel.widget import FITS, OperatorPanelWidget

    lab = tmp_path / "lab"
    plan_path = tmp_path / "steady_v3_against_shaky_v1.yaml"  # the lab's file may name them: the panel never does
    plan = EvaluationPlan.parse(plan_data(), source=str(plan_path))
    graph = LeakyOrchestrator()
    clock = iter(range(1_800_000_000, 1_800_100_000)).__next__
    controller = PanelController(graph, EpisodeRecordStore(lab), plan, operator="ana", clock=clock)
    widget = OperatorPanelWidget(controller, graph, refresh_ms=3_600_000)  # the test polls, not the timer
    qtbot.addWidget(widget)
    widget.resize(*FITS)
    widget.show()
    qtbot.waitExposed(widget)
    widget.take_keyboard()
    qtbot.waitUntil(lambda: QApplication.focusWidget() is not None)
    print(startup_line(parse_plugin_args(["--out", str(lab), "--plan", str(plan_path)]), controller))
    secrets = [text for name, (config, digest) in POLICIES.items()
               for text in (name, config, os.path.basename(config), digest, digest[:8])]
    shown: list[str] = []

    def poll():
        widget.poll()
        shown.extend(widget.shown_texts(log=False))

    def leaks():
        everything = "\n".join(shown + [widget.log.toPlainText()] + [
            p.read_text() for p in lab.rglob("*.json")] + [capfd.readouterr().out])
        # each secret found, with what stands around it
        return [(s, everything[max(0, everything.index(s) - 150):everything.index(s) + 60])
                for s in secrets if s in everything]

    graph.inbox.put(("status", EpisodeStatus(episode_id="", state="idle",
                                             message=f"serving {', '.join(NAMES)}")))
    graph.inbox.put(("policy_status", graph.policy_status()))
    poll()

    def key(k, modifier=Qt.NoModifier):
        qtbot.keyClick(QApplication.focusWidget() or widget, k, modifier)

    outcomes = {}
    for pair in range(2):
        for arm in ("A", "B"):
            ran = False
            while not ran:  # the first start is refused (its reason names the policy), then F5 again
                assert widget.next_system.text() == f"{arm} (pair {pair})"
                before = len(graph.commands)
                key(Qt.Key_F5)
                assert len(graph.commands) == before + 1, list(controller.model.log)[-3:]
                command = graph.commands[-1]
                assert command.policy in NAMES and command.policy == plan.pairs[pair][arm].policy
                ran = graph.play(widget, success=(command.policy == "steady_v3"))
                poll()
            outcomes[arm] = controller.model.status.result["success"]
            assert f"system {arm}" in widget.headline.text() and SEALED in widget.headline.toolTip() + "".join(
                controller.model.log)
            key(Qt.Key_1 if outcomes[arm] else Qt.Key_2, Qt.ControlModifier)
            key(Qt.Key_Return, Qt.ControlModifier)
            poll()
            assert leaks() == [], f"pair {pair} {arm}"
        preference = "tie" if outcomes["A"] == outcomes["B"] else ("A" if outcomes["A"] else "B")
        key(Qt.Key_R, Qt.AltModifier)
        qtbot.keyClicks(widget.reason, "A held the carrot" if preference == "A" else "B held the carrot")
        if pair == 1:
            assert leaks() == [] and not ABSessionStore(lab, "ckpt_day").closed
            closing = widget.log.toPlainText()
        key({"A": Qt.Key_A, "B": Qt.Key_B, "tie": Qt.Key_T}[preference], Qt.AltModifier)
        poll()
    assert "START REFUSED" in closing and "not ready: warming up: loading" in closing  # the refusal, redacted
    assert graph.refused_once and not any(s in closing for s in secrets)

    store = ABSessionStore(lab, "ckpt_day")
    assert store.closed, "the session did not close after its last preference"
    key_doc = read_key(store.key_path)
    for number, p in key_doc["pairs"].items():
        for arm in ("A", "B"):
            name = plan.pairs[int(number)][arm].policy
            assert p[arm] == {"variant": "proprio_verifier", "policy": name, "config": POLICIES[name][0],
                              "config_hash": POLICIES[name][1]}
    revealed = widget.log.toPlainText()[len(closing):]
    assert "A/B session ckpt_day closed" in revealed and all(name in revealed for name in NAMES)  # a scan would see
    for record in EpisodeRecordStore(lab).records():
        assert record.result["policy"] in ("A", "B") and record.result["policy_config_hash"] in ("A", "B")

    ranking = build_report(load_episodes(lab), ab_keys(lab), ab_pairs(lab))["ab_ranking"]
    names = [s["system"] for s in ranking["systems"]]
    assert names == ["steady_v3@1a2b3c4d/proprio_verifier", "shaky_v1@8899aabb/proprio_verifier"]
    assert ranking["pairs"] == 2 and ranking["systems"][0]["wins"] == 2
    widget.close_panel()
