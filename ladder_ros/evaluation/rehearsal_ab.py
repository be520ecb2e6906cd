"""``ladder-ros rehearse widowx --ab-pairs N --policies NAME=SPEC,NAME=SPEC``: a blind policy A/B session, rehearsed.

A lab asks "is checkpoint B better than A?" by a blind A/B session (docs/operator.md): the graph serves both
policies by name, the operator panel runs a plan that compares them (``compare: {policy: [a, b]}``,
:mod:`ladder_ros.panel.evaluation_plan`), the operator sees only "A" and "B", states a preference per pair, the
panel seals the key when the session closes, and ``ladder-ros report`` ranks the two (Bradley–Terry,
:mod:`ladder_ros.evaluation.ranking`). The rehearsal runs all of it end to end on the WidowX twin
(:mod:`ladder_ros.evaluation.rehearsal`):

* **Two policies, two servers.** Each ``NAME=SPEC`` is a policy the graph's policy node serves under ``NAME``
  (its ``policies`` parameter), answered by a rehearsal server of its own (``rehearsal_server``,
  ``rehearsal_server_2``: the twin mode gains a server node per policy, :func:`with_rehearsal_servers`) on a
  loopback port of its own. ``SPEC`` is a noise preset of the scripted expert (``off``, ``bridge_like``,
  ``clumsy``: ``ladder_ros/instruments/expert/noise.py``), served under a copy of the twin mode's policy config,
  or a policy config (a name under ``policies/`` or a path), served with the server's noise parameter; ``@MS``
  after it gives that server its own inference time. The configs are written to ``OUT/policies/NAME.yaml``.
* **The panel, offscreen, with a scripted operator** (:class:`ScriptedOperator`): the panel's own ROS bridge,
  controller and (where Qt is installed) widget, on a node beside the graph, run the plan ``OUT/ab_plan.yaml``
  (``--ab-pairs`` pairs per variant, the tasks in turn, orders from ``--order-seed``). The operator starts
  each episode from the panel, labels it by what it sees on the table (the twin's scene: success, and each
  subgoal done or not), and after each pair's B states its preference as a careful operator does: the arm
  that succeeded, else the one that got more subgoals done, a tie when the two outcomes are equal.
* **What the operator saw.** Every text the panel showed (widget texts and tooltips, the event log) and every
  line this command printed while the session was open is kept (``OUT/panel_transcript.txt``, written once
  it closes) and scanned for the policies' names, config paths and config digests
  (``OUT/summary.json``, ``ab.scan``); a rehearsal whose scan finds one ends with an error.
* Once the session closes (the key written), the command reveals which policy ran as A and B in every pair,
  each policy's success with its Wilson interval, and runs ``ladder-ros report`` over ``OUT``.

``OUT/episodes.jsonl`` holds the rehearsal's records (timing, the twin's score) masked as the panel keeps its
own: while the session is open no file under ``OUT`` names which policy ran an episode.
"""

from __future__ import annotations

import argparse
import json
import queue
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable, Sequence

import yaml

from ladder_ros.bringup.graph import GraphDescription, NodeEntry
from ladder_ros.core.errors import ConfigError, LadderError
from ladder_ros.core.metrics import wilson_interval

SERVER = "rehearsal_server"  # the twin mode's server node; a second policy's is rehearsal_server_2, ...
PLAN_NAME = "rehearsal_ab"
PLAN_FILE = "ab_plan.yaml"
TRANSCRIPT_FILE = "panel_transcript.txt"
OPERATOR = "scripted operator"
PANEL_WAIT_S = 30.0  # the panel hears the graph's final status of an episode within this long of the client
TRIES_PER_ENTRY = 3  # a plan entry whose episodes are void this often ends the rehearsal


# ------------------------------------------------------------------------------ the policies
@dataclass(frozen=True)
class RehearsalArm:
    """One policy of a rehearsed A/B session and the server that answers for it (see the module docstring)."""

    name: str
    config: str  # the policy config its copy is made of (a name under policies/ or a path; "": the twin mode's)
    noise: str | None  # the server's expert noise preset (None: the server's parameter)
    delay_ms: float | None  # the server's inference time (None: --inference-delay-ms, else its parameter)
    server: str = SERVER  # its server node

    def describe(self) -> str:
        what = f"the scripted expert with {self.noise} noise" if self.noise else "the server's noise"
        return what + (f", {self.delay_ms:g} ms inference" if self.delay_ms is not None else "")


def server_names(count: int) -> list[str]:
    return [SERVER] + [f"{SERVER}_{k}" for k in range(2, count + 1)]


def parse_arms(text: str) -> list[RehearsalArm]:
    """``NAME=SPEC[@MS],NAME=SPEC[@MS]`` (see the module docstring)."""
    from ladder_ros.instruments.expert.noise import NOISE_PRESETS
    from ladder_ros.policies.factory import policy_config_path, policy_name_problem

    arms = []
    for item in [t.strip() for t in str(text or "").split(",") if t.strip()]:
        name, sep, spec = item.partition("=")
        name, spec = name.strip(), spec.strip()
        if not sep or not spec:
            raise ConfigError(f"--policies: {item!r} is not NAME=SPEC (SPEC a noise preset: "
                              f"{', '.join(NOISE_PRESETS)}; or a policy config; @MS after it: its inference time)")
        problem = policy_name_problem(name)
        if problem:
            raise ConfigError(f"--policies: {problem}")
        delay = None
        if "@" in spec:
            spec, _, ms = spec.rpartition("@")
            try:
                delay = float(ms)
            except ValueError:
                raise ConfigError(f"--policies: {item!r}: the inference time after @ is a number of ms") from None
            if not 0 <= delay <= 10000:
                raise ConfigError(f"--policies: {item!r}: the inference time must be in [0, 10000] ms")
        if spec in NOISE_PRESETS:
            arm = RehearsalArm(name, "", spec, delay)
        else:
            policy_config_path(spec)  # an unknown config is refused here, naming the ones there are
            arm = RehearsalArm(name, spec, None, delay)
        arms.append(arm)
    if len(arms) != 2:
        raise ConfigError(f"--policies names the two policies a blind A/B session compares, got {len(arms)}")
    if arms[0].name == arms[1].name:
        raise ConfigError(f"--policies names {arms[0].name!r} twice")
    return [replace(arm, server=server) for arm, server in zip(arms, server_names(len(arms)))]


def with_rehearsal_servers(graph: GraphDescription, mode: str, count: int) -> GraphDescription:
    """``graph`` whose ``mode`` runs ``count`` rehearsal servers: the mode's own and copies of it after it (same
    remappings, the same mode parameters)."""
    entry = graph.mode(mode)
    if SERVER not in entry.nodes:
        raise ConfigError(f"graph {graph.name}'s {mode} mode runs no {SERVER}: no policy to serve twice")
    extra = server_names(count)[1:]
    clash = [name for name in extra if name in graph.nodes]
    if clash:
        raise ConfigError(f"graph {graph.name} has a node {clash[0]!r} already", source=graph.source)
    nodes = dict(graph.nodes)
    for name in extra:
        nodes[name] = NodeEntry(name=name, executable=graph.nodes[SERVER].executable,
                                remappings=graph.nodes[SERVER].remappings)
    at = entry.nodes.index(SERVER) + 1
    parameters = dict(entry.parameters)
    if SERVER in parameters:
        parameters.update({name: dict(parameters[SERVER]) for name in extra})
    mode_entry = replace(entry, nodes=(*entry.nodes[:at], *extra, *entry.nodes[at:]), parameters=parameters)
    return replace(graph, nodes=nodes, modes={**graph.modes, mode: mode_entry})


def write_arm_config(arm: RehearsalArm, config: str, folder: Path, port: int) -> Path:
    """A copy of ``config`` (the arm's) named after the arm, whose server is the arm's on a loopback ``port``."""
    from ladder_ros.policies.factory import policy_config_path

    data = yaml.safe_load(policy_config_path(config).read_text(encoding="utf-8"))
    data["name"] = arm.name
    data["description"] = (f"rehearsal policy {arm.name}: {arm.describe()}, answered by the rehearsal's "
                           f"{arm.server} (ladder-ros rehearse --policies); made of {config}")
    server = data.setdefault("server", {})
    server["host"], server["port"] = "127.0.0.1", int(port)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{arm.name}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


def serve_arms(parsed: dict, arms: Sequence[RehearsalArm], params: dict, out: Path,
               free_port: Callable[[], int]) -> dict[str, str]:
    """The overrides that serve ``arms`` (into ``parsed``): each arm's config copy, the policy node's ``policies``
    and each server's config, noise and inference time, the other servers' parameters as the first one's.
    Returns each arm's config path by name."""
    mode_config = params["policy"]["policy"]
    paths = {arm.name: str(write_arm_config(arm, arm.config or mode_config, out / "policies", free_port()).resolve())
             for arm in arms}
    policy = parsed.setdefault("policy", {})
    policy["policies"] = [f"{arm.name}={paths[arm.name]}" for arm in arms]
    policy["default_policy"] = arms[0].name
    policy["policy"] = paths[arms[0].name]
    first = {k: v for k, v in params[SERVER].items() if k != "clock_mode"}
    for arm in arms:
        server = parsed.setdefault(arm.server, {} if arm.server == SERVER else dict(first))
        server["policy"] = paths[arm.name]
        if arm.noise is not None:
            server["noise"] = arm.noise
        if arm.delay_ms is not None:
            server["inference_delay_ms"] = float(arm.delay_ms)
    return paths


# ------------------------------------------------------------------------------ the plan
def session_plan(arms: Sequence[RehearsalArm], task_ids: Sequence[str], layouts: Sequence[int], pairs: int, *,
                 seed: int, order_seed: int, variants: Sequence[str]) -> dict:
    """The plan of ``pairs`` pairs per variant, the tasks taken in turn (task ``i`` gets pairs ``i``, ``i + T``,
    ...); episode ``k`` of a task uses seed ``seed + k`` and layout ``k`` mod its layouts."""
    counts = [len(range(i, pairs, len(task_ids))) for i in range(len(task_ids))]
    return {"schema_version": 1, "name": PLAN_NAME, "seed": int(seed), "order_seed": int(order_seed),
            "compare": {"policy": [arm.name for arm in arms], "variant": list(variants)},
            "tasks": [{"task": t, "episodes": n, "layouts": int(lay)}
                      for t, lay, n in zip(task_ids, layouts, counts) if n]}


# ------------------------------------------------------------------------------ the scripted operator
def seen_outcome(record: dict) -> tuple[bool, int, int] | None:
    """What the operator sees on the table once an episode is over (the twin's scene, as its score says it):
    success, subgoals done and the task's subgoals; None when the episode was not scored."""
    if not record.get("scored"):
        return None
    return bool(record.get("success")), int(record.get("subgoals_done", 0)), int(record.get("horizon", 0))


def preference(a: tuple[bool, int, int] | None, b: tuple[bool, int, int] | None) -> str:
    """A careful operator's preference from the two outcomes it saw: the arm that succeeded, else the one that got
    more subgoals done; a tie when they are equal (or one was not seen)."""
    if a is None or b is None or a[:2] == b[:2]:
        return "tie"
    return "A" if a[:2] > b[:2] else "B"


def describe_outcome(outcome: tuple[bool, int, int] | None) -> str:
    if outcome is None:
        return "not seen"
    return f"{'success' if outcome[0] else 'failure'}, {outcome[1]}/{outcome[2]} subgoals"


class Transcript:
    """Everything the operator saw while the session was open: each distinct text the panel showed, its event log,
    and each line this command printed, in order."""

    def __init__(self) -> None:
        self.shown: dict[str, None] = {}
        self.lines: list[str] = []
        self.open = True

    def saw(self, texts: Sequence[str]) -> None:
        if self.open:
            for text in texts:
                self.shown.setdefault(text, None)

    def line(self, text: str) -> None:
        if self.open:
            self.lines.append(text)

    def text(self) -> str:
        return "\n".join([*self.shown, *self.lines])


class ScriptedOperator:
    """The panel of a rehearsed blind session and the operator at it (see the module docstring): the panel's bridge
    and controller on ``node``, its widget offscreen when Qt is installed."""

    def __init__(self, node, namespace: str, out: Path, plan, say: Callable[[str], None] = print):
        from ladder_ros.panel.bridge import PanelBridge
        from ladder_ros.panel.controller import PanelController
        from ladder_ros.panel.records import EpisodeRecordStore

        self.bridge = PanelBridge(node, namespace)
        self.controller = PanelController(self.bridge, EpisodeRecordStore(out), plan, operator=OPERATOR)
        self.transcript = Transcript()
        self._say = say
        self._log_seen = 0
        self.widget = self._offscreen_widget()

    def _offscreen_widget(self):
        """The panel's widget on an offscreen Qt platform (None without Qt: the panel's model is what it showed)."""
        try:
            from python_qt_binding.QtWidgets import QApplication

            from ladder_ros.panel.widget import OperatorPanelWidget
        except ImportError:
            return None
        self._app = QApplication.instance() or QApplication(["ladder-ros rehearse", "-platform", "offscreen"])
        return OperatorPanelWidget(self.controller, self.bridge, refresh_ms=3_600_000)  # polled here, not timed

    @property
    def shows(self) -> str:
        return "the panel's widget, offscreen" if self.widget is not None else "the panel's model (no Qt here)"

    def say(self, line: str) -> None:
        """Print a line as the operator's terminal shows it (what the panel's secrets redacted) and keep it."""
        line = self.controller.shown_text(line)
        self.transcript.line(line)
        self._say(line)

    def pump(self, _episode_id: str = "") -> None:
        """What the graph sent, into the panel; what it showed while the session was open, into the transcript."""
        from ladder_ros.panel.bridge import dispatch

        ctl = self.controller
        was_open = self.transcript.open
        if self.widget is not None:
            self.widget.poll()
            shown = self.widget.shown_texts(log=False)
        else:
            for _ in range(1000):
                try:
                    kind, payload = self.bridge.inbox.get_nowait()
                except queue.Empty:
                    break
                dispatch(ctl, kind, payload)
            model = ctl.model
            shown = [model.headline(), model.instruction(), model.current_subgoal, model.vlm_summary(),
                     *(f"{r.text} {r.state} {r.verdict.text if r.verdict else ''}" for r in model.rows())]
        lines = ctl.model.log.since(self._log_seen)
        self._log_seen = ctl.model.log.total
        closed = ctl.ab is not None and ctl.ab.closed
        if closed:  # what the panel showed up to the key; from there on it reveals the systems
            mark = f"A/B session {ctl.plan.name} closed"
            lines = lines[:next((i for i, line in enumerate(lines) if line.startswith(mark)), len(lines))]
            shown = []
        if was_open:
            self.transcript.saw([*shown, *lines])
        self.transcript.open = not closed

    def refusal(self, episode_id: str) -> str | None:
        """The orchestrator's refusal of the start of ``episode_id``, as the panel's log has it."""
        mark = f"START REFUSED ({episode_id}): "
        return next((line[len(mark):] for line in self.controller.model.log if line.startswith(mark)), None)

    def start(self) -> str:
        """F5: the plan's next entry."""
        episode_id = self.controller.start()
        if episode_id is None:
            raise LadderError(f"the panel did not start the next episode: {list(self.controller.model.log)[-1]}")
        return episode_id

    def label(self, episode_id: str, outcome: tuple[bool, int, int] | None, subgoals: Sequence[dict]) -> None:
        """The episode's labels as the operator sees the table: each subgoal done or not, and the episode."""
        from ladder_ros.messages import DONE, FAILURE, NOT_DONE, PARTIAL, SUCCESS

        ctl = self.controller
        if outcome is None:
            ctl.set_note("the outcome was not seen (no score of the scene)", episode_id=episode_id)
            return
        for index, subgoal in enumerate(subgoals):
            if index < len(ctl.model.plan):
                ctl.label_subgoal(index, DONE if subgoal.get("done") else NOT_DONE, episode_id=episode_id)
        ctl.label_episode(SUCCESS if outcome[0] else PARTIAL if outcome[1] else FAILURE, episode_id=episode_id)
        ctl.finish_labels(True, episode_id=episode_id)

    def judge(self, episode_id: str, a: tuple[bool, int, int] | None, b: tuple[bool, int, int] | None) -> str:
        """The pair's preference (Alt+A / Alt+B / Alt+T) with its reason, stated with its B on screen."""
        chosen = preference(a, b)
        self.controller.set_reason(f"A: {describe_outcome(a)}; B: {describe_outcome(b)}", episode_id=episode_id)
        self.controller.prefer(chosen, episode_id=episode_id)
        return chosen

    def close(self) -> None:
        if self.widget is not None:
            self.widget.close_panel()
        self.bridge.close()


class PanelStarts:
    """The graph's episode client as the rehearsal uses it in a blind session: a start is the operator's, pressed
    on the panel for the plan's next entry (it must be the episode the rehearsal runs); the rest is the client's."""

    def __init__(self, client, operator: ScriptedOperator):
        self._client, self._operator = client, operator

    def start_episode(self, task_id: str, *, variant: str = "", layout: int = 0, seed: int = 0, **_start) -> str:
        entry = self._operator.controller.next_entry()
        asked = (task_id, variant, layout, seed)
        if entry is None or (entry.task_id, entry.variant, entry.layout, entry.seed) != asked:
            raise LadderError(f"the panel's next episode is not {task_id} layout {layout} seed {seed}")
        return self._operator.start()

    def __getattr__(self, name: str):
        return getattr(self._client, name)


# ------------------------------------------------------------------------------ the session
def arm_secrets(arms: Sequence[RehearsalArm], params: dict):
    """What must not reach the operator: each policy's name and config (path and file name); each episode's config
    digest joins them as it runs (:func:`run_session`)."""
    from ladder_ros.panel.blind import SessionSecrets

    secrets = SessionSecrets()
    for arm in arms:
        secrets.learn(arm.name, params[arm.server]["policy"])
    return secrets


def run_session(rehearsal, operator: ScriptedOperator, plan, *, timeout_s: float, jsonl, extra: dict,
                secrets) -> list[dict]:
    """Every entry of ``plan`` through the panel, each pair judged after its B; returns the rehearsal's records
    (each with its pair and arm, and the outcome the operator saw). ``jsonl`` gets each record masked by
    ``secrets`` (:class:`~ladder_ros.panel.blind.SessionSecrets`; each record's config digest joins them)."""
    ctl, records, tries = operator.controller, [], {}
    spin = rehearsal._spin_until
    spin(rehearsal.executor, lambda: (operator.pump() or ctl.model.status is not None), PANEL_WAIT_S,
         "the panel hearing the orchestrator")
    seen: dict[int, dict[str, tuple[bool, int, int] | None]] = {}
    while not (ctl.ab.closed or (entry := ctl.next_entry()) is None):
        tries[entry.key] = tries.get(entry.key, 0) + 1
        if tries[entry.key] > TRIES_PER_ENTRY:
            raise LadderError(f"plan entry {entry.key}: void {TRIES_PER_ENTRY} times; the session stays open")

        def during(episode_id: str) -> None:
            operator.pump()
            reason = operator.refusal(episode_id)
            if reason is not None:
                raise LadderError(f"the orchestrator refused the panel's start of {episode_id}: {reason}")

        record = rehearsal.episode(entry.task_id, variant=entry.variant, layout=entry.layout, seed=entry.seed,
                                   timeout_s=timeout_s, during=during)
        episode_id = record["episode_id"]

        def panel_has_it() -> bool:
            operator.pump()
            r = ctl.record
            return r is not None and r.episode_id == episode_id and r.over and r.result is not None

        spin(rehearsal.executor, panel_has_it, PANEL_WAIT_S, f"the panel hearing the end of {episode_id}")
        outcome = seen_outcome(record)
        record.update(extra, ab={"session": plan.name, "pair": entry.pair, "arm": entry.arm,
                                 "seen": describe_outcome(outcome), "void": ctl.record.void})
        records.append(record)
        secrets.add(str(record.get("policy_config_hash", "")), str(record.get("policy_config_hash", ""))[:8])
        jsonl.write(json.dumps(secrets.mask(record, entry.arm)) + "\n")  # what ran stays sealed on disk too
        jsonl.flush()
        if ctl.record.void:
            operator.say(f"  pair {entry.pair} {entry.arm}: void ({ctl.record.finish_reason}); it runs again")
            continue
        operator.label(episode_id, outcome, record.get("subgoals") or [])
        seen.setdefault(entry.pair, {})[entry.arm] = outcome
        timing = record.get("timing") or {}
        age = (timing.get("obs_to_action_age_ms") or {}).get("p50")
        operator.say(f"  pair {entry.pair} {entry.arm}: {entry.task_id} layout {entry.layout} seed {entry.seed}: "
                     f"{describe_outcome(outcome)}, {record.get('steps_used')}/{record.get('budget_steps')} steps, "
                     f"{record.get('finish_reason')}; observation to action p50 {age} ms, "
                     f"{record.get('wall_s', 0.0):.1f} s")
        if entry.arm == "B":
            chosen = operator.judge(episode_id, seen[entry.pair].get("A"), outcome)
            operator.say(f"  pair {entry.pair}: preferred {chosen}")
        operator.pump()
    if not ctl.ab.closed:
        ctl.close_session()
        operator.pump()
    return records


def reveal(plan, arms: Sequence[RehearsalArm], records: Sequence[dict], key: dict) -> dict:
    """Once the key is written: each policy's success over the session (Wilson 95 %) and what the operator
    preferred, by policy."""
    by_policy = {arm.name: [r for r in records if r.get("policy") == arm.name and not r["ab"]["void"]]
                 for arm in arms}
    success = {}
    for name, mine in by_policy.items():
        scored = [r for r in mine if r.get("scored")]
        wins = sum(1 for r in scored if r.get("success"))
        lo, hi = wilson_interval(wins, len(scored))
        success[name] = {"episodes": len(scored), "successes": wins,
                         "success_rate": wins / len(scored) if scored else None, "ci95": [lo, hi],
                         "subgoal_progress": (sum(r.get("subgoals_done", 0) for r in scored)
                                              / max(1, sum(r.get("horizon", 0) for r in scored)))}
    preferred = {arm.name: 0 for arm in arms} | {"tie": 0}
    for p in key["pairs"].values():
        choice = p.get("preference")
        if choice in ("A", "B", "tie"):
            winner = "tie" if choice == "tie" else str(p[choice].get("policy", ""))
            preferred[winner] = preferred.get(winner, 0) + 1
    return {"session": plan.name, "pairs": len(key["pairs"]), "complete_pairs": key.get("complete_pairs"),
            "order_seed": key.get("order_seed"), "success": success, "preferred": preferred}


def write_session_plan(out: Path, arms: Sequence[RehearsalArm], tasks, pairs: int, *, seed: int, order_seed: int,
                       variants: Sequence[str]):
    """``OUT/ab_plan.yaml`` (:func:`session_plan`), read back as the panel reads it, checked against the policies."""
    from ladder_ros.panel.evaluation_plan import EvaluationPlan

    path = out / PLAN_FILE
    path.write_text(yaml.safe_dump(session_plan(arms, [t.task_id for t in tasks], [t.layouts for t in tasks], pairs,
                                                seed=seed, order_seed=order_seed, variants=variants),
                                   sort_keys=False), encoding="utf-8")
    return EvaluationPlan.load(path, served_policies=[arm.name for arm in arms])


def conclude(out: Path, plan, arms: Sequence[RehearsalArm], params: dict, records: Sequence[dict],
             operator: ScriptedOperator, secrets, summary: dict, made_of: str) -> list[str]:
    """Once the session is closed: the key revealed, each policy's success, the scan of what the operator saw,
    ``OUT/summary.json`` (``summary`` with ``ab``) and ``ladder-ros report`` over ``OUT``; returns the secrets the
    scan found."""
    from ladder_ros.evaluation.report_render import run as report
    from ladder_ros.panel.ab_session import ABSessionStore, read_key, system_label

    key = read_key(ABSessionStore(out, plan.name).key_path)
    log = list(operator.controller.model.log)
    closed = next((i for i, line in enumerate(log) if line.startswith(f"A/B session {plan.name} closed")), len(log))
    for line in log[closed:]:  # the key, as the panel revealed it
        print(line)
    result = reveal(plan, arms, records, key)
    transcript = operator.transcript
    (out / TRANSCRIPT_FILE).write_text(transcript.text() + "\n", encoding="utf-8")
    found = secrets.found(transcript.text())
    result["scan"] = {"texts_shown": len(transcript.shown), "lines_printed": len(transcript.lines),
                      "shown_by": operator.shows, "secrets": sorted(secrets.secrets), "found": found,
                      "transcript": str(out / TRANSCRIPT_FILE)}
    result["arms"] = [{"policy": arm.name, "config": params[arm.server]["policy"], "server": arm.server,
                       "noise": params[arm.server]["noise"],
                       "inference_delay_ms": params[arm.server]["inference_delay_ms"],
                       "made_of": arm.config or made_of} for arm in arms]
    (out / "summary.json").write_text(json.dumps({**summary, "ab": result}, indent=2) + "\n", encoding="utf-8")
    for arm in result["arms"]:
        s = result["success"][arm["policy"]]
        print(f"{arm['policy']}: {arm['noise']} noise, {arm['inference_delay_ms']:g} ms inference ({arm['server']}, "
              f"{arm['config']}): task success {s['successes']}/{s['episodes']} (95% CI {s['ci95'][0]:.0%}-"
              f"{s['ci95'][1]:.0%}), subgoal progress {s['subgoal_progress']:.0%}; preferred in "
              f"{result['preferred'][arm['policy']]} pairs")
    print(f"ties: {result['preferred']['tie']}; systems: " + ", ".join(
        sorted({system_label(p[a]) for p in key["pairs"].values() for a in ("A", "B")})))
    print(f"panel scan ({operator.shows}): {len(transcript.shown)} texts shown and {len(transcript.lines)} lines "
          "printed while the session was open; "
          + (f"FOUND {', '.join(found)}" if found else "none names a policy, its config or its digest"), flush=True)
    report(argparse.Namespace(dir=str(out), out=None))
    return found


def open_panel(session, namespace: str, out: Path, plan) -> tuple:
    """The scripted operator's panel on a node of its own in the session's executor: (node, operator)."""
    import rclpy

    node = rclpy.create_node("rehearsal_panel")
    session.executor.add_node(node)
    return node, ScriptedOperator(node, "/" + namespace.strip("/"), out, plan)


def close_panel(session, node, operator: ScriptedOperator) -> None:
    operator.close()
    session.executor.remove_node(node)
    node.destroy_node()


# ------------------------------------------------------------------------------ the command line
def add_ab_arguments(p: argparse.ArgumentParser) -> None:
    """``--ab-pairs``, ``--policies`` and ``--order-seed`` (a rehearsed blind policy A/B session)."""
    p.add_argument("--ab-pairs", type=int, default=0, metavar="N",
                   help="run a blind A/B session of N pairs (per variant) between the two --policies instead of "
                        "--episodes: the panel offscreen with a scripted operator, then ladder-ros report "
                        "(docs/rehearsal.md, 'Blind policy A/B')")
    p.add_argument("--policies", default="", metavar="NAME=SPEC,NAME=SPEC",
                   help="the two policies of --ab-pairs, each served by its own rehearsal server: SPEC a noise "
                        "preset of the scripted expert (off, bridge_like, clumsy) or a policy config; @MS after it "
                        "gives its server an inference time (e.g. low_noise=bridge_like,high_noise=clumsy@150)")
    p.add_argument("--order-seed", type=int, default=0,
                   help="seeds which policy runs first in each pair of --ab-pairs (the plan's order_seed)")


def check_ab_arguments(args: argparse.Namespace) -> None:
    """What a rehearsed A/B session refuses before anything starts."""
    if args.ab_pairs < 1:
        raise ConfigError(f"--ab-pairs must be >= 1, got {args.ab_pairs}")
    if not args.policies:
        raise ConfigError("--ab-pairs compares the two policies of --policies NAME=SPEC,NAME=SPEC")
    if args.order_seed < 0:
        raise ConfigError(f"--order-seed must be >= 0, got {args.order_seed}")
    if args.faults:
        raise ConfigError("--faults and --ab-pairs: a rehearsed A/B session runs without injected faults")
    if getattr(args, "launch", None):
        raise ConfigError("--ab-pairs starts a rehearsal server per policy, which the launch files do not: leave "
                          "out --launch")
