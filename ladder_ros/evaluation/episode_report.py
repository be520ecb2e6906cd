"""``ladder-ros report DIR``: the paper's tables over recorded episodes, simulated or real.

Success by horizon and by category with 95 % Wilson intervals, subgoal progress and failure causes
(Section 3, Appendix F) come from :func:`ladder_ros.core.metrics.summarize_episodes`, the function
``sim-eval`` uses, so the same episodes give the same numbers. Per episode (Appendix G): VLM calls,
tokens and cost (from the verifier's and planner's answers in the recording, or the panel's record),
robot time (steps / control rate, and its share of the step budget) and wall time. Operator versus
VLM: every subgoal the operator labelled done / not done against the VLM's last verdict on it,
as precision and recall of the verifier's "complete" (with Wilson intervals).

Which outcome counts: a simulated episode is scored by the simulator's predicates (as in
``sim-eval``); an episode without a simulator score (a robot) by the operator's labels — the
episode label for task success, the subgoal labels for progress and, for each subgoal not done,
the failure cause the orchestrator's queue tells (left it, worked on it, never reached it). An
episode with neither is listed as unlabelled and left out of the rates.

Output: ``report.md``, ``report.html`` (one self-contained page: plots and episode thumbnails
inline), ``summary.json`` and the plots as PNG files, in ``--out`` (default ``DIR/report``).
"""

from __future__ import annotations

import argparse
import base64
import html
import io
import json
from collections import Counter
from pathlib import Path
from typing import Any, Iterable

from ladder_ros.core.errors import ConfigError
from ladder_ros.core.metrics import (
    ADVANCED_BEFORE_COMPLETION,
    ATTEMPTED_NEVER_COMPLETED,
    FAILURE_CAUSES,
    NEVER_REACHED,
    summarize_episodes,
    wilson_interval,
)
from ladder_ros.core.presets import PRESETS
from ladder_ros.evaluation import report as tables
from ladder_ros.evaluation.episodes import IMAGE_SUFFIX, RecordedEpisode, load_episodes, with_records
from ladder_ros.messages import DONE, SUCCESS

UNLABELLED = "unlabelled"
THUMB_WIDTH = 160  # px of an episode thumbnail in the HTML page


# ------------------------------------------------------------------------------ outcomes
def simulator_scored(record: dict) -> bool:
    """The record carries the simulator's privileged score (sim-eval, or a graph run in simulation)."""
    if "scored" in record:
        return bool(record["scored"])
    return bool(record.get("simulator"))


def operator_outcome(record: dict, labels) -> dict | None:
    """The record with success, progress and failure causes from the operator's labels (None: no episode
    label yet)."""
    if labels is None or labels.episode is None:
        return None
    orchestration = record.get("orchestration") or {}
    plan = orchestration.get("plan") or [s for s in (record.get("task") or {}).get("subgoals", [])]
    left = (set(orchestration.get("advanced", [])) | set(orchestration.get("completed", []))) - set(
        orchestration.get("pending", []))
    ever = set(orchestration.get("ever_current", []))
    outcomes = []
    for i, subgoal in enumerate(plan or [{}] * int(record.get("horizon", 0))):
        label = labels.subgoal_label(i)
        cause = None
        if label != DONE:
            if label is None:
                cause = UNLABELLED
            elif i in left:
                cause = ADVANCED_BEFORE_COMPLETION
            elif i in ever:
                cause = ATTEMPTED_NEVER_COMPLETED
            else:
                cause = NEVER_REACHED
        outcomes.append({"index": i, "text": subgoal.get("text", ""), "done": label == DONE, "cause": cause,
                         "first_done_step": None})
    scored = dict(record)
    scored.update(success=labels.episode == SUCCESS, subgoals_done=sum(1 for o in outcomes if o["done"]),
                  subgoals=outcomes, outcome_source="operator")
    return scored


def outcome_record(episode: RecordedEpisode) -> dict | None:
    """The record the tables count for ``episode`` (None: unlabelled robot episode)."""
    record = episode.record
    if record is None:
        return None
    if simulator_scored(record):
        return {**record, "outcome_source": "simulator"}
    return operator_outcome(record, episode.labels)


# ------------------------------------------------------------------------------ per episode (Appendix G)
def control_rate(record: dict) -> float | None:
    started = next((e for e in record.get("events", []) if e.get("kind") == "episode_started"), None)
    preset = PRESETS.get(str((started or {}).get("preset", "")))
    return preset.control_rate_hz if preset is not None else None


def episode_row(episode: RecordedEpisode) -> dict[str, Any]:
    record = episode.record or {}
    rate = control_rate(record)
    steps = int(record.get("steps_used", 0))
    calls = episode.vlm_calls
    usage = [c.get("usage") or {} for c in calls]
    costs = [u.get("cost_usd") for u in usage]
    queries = int(record.get("verification_queries", 0))
    plan = record.get("plan") or {}
    return {
        "episode_id": episode.episode_id, "task_id": record.get("task_id"), "variant": record.get("variant"),
        "horizon": record.get("horizon"), "category": record.get("category"),
        "success": record.get("success"), "subgoals_done": record.get("subgoals_done"),
        "finish_reason": record.get("finish_reason"),
        # a query is one VLM call; a plan from the planner one more
        "vlm_calls": max(len(calls), queries + (1 if plan.get("source") == "planner" else 0)),
        "input_tokens": sum(u.get("input_tokens") or 0 for u in usage),
        "output_tokens": sum((u.get("output_tokens") or 0) + (u.get("thinking_tokens") or 0) for u in usage),
        "cost_usd": None if any(c is None for c in costs) and calls else round(sum(c or 0 for c in costs), 6),
        "steps_used": steps, "budget_steps": record.get("budget_steps"),
        "robot_time_s": steps / rate if rate else None,
        "budget_share": steps / record["budget_steps"] if record.get("budget_steps") else None,
        "wall_s": record.get("wall_s"),
        "labels": episode.labels.to_dict() if episode.labels is not None else None,
    }


# ------------------------------------------------------------------------------ operator vs VLM
def agreement(episodes: Iterable[RecordedEpisode]) -> dict[str, Any]:
    """The VLM's last verdict on each operator-labelled subgoal against the label: precision and recall
    of "complete" (positive: the operator says done)."""
    counts = Counter()
    for e in episodes:
        if e.labels is None or e.record is None:
            continue
        last: dict[int, bool] = {}
        for event in e.record.get("events", []):
            if event.get("kind") == "verification_answered":
                last[int(event["plan_index"])] = bool(event.get("complete"))
        for key, label in e.labels.subgoals.items():
            index = int(key)
            if index not in last:
                counts["labelled_without_verdict"] += 1
                continue
            said, truth = last[index], label == DONE
            counts[("tp" if truth else "fp") if said else ("fn" if truth else "tn")] += 1
    tp, fp, fn, tn = (counts[k] for k in ("tp", "fp", "fn", "tn"))
    return {"tp": tp, "fp": fp, "fn": fn, "tn": tn, "compared": tp + fp + fn + tn,
            "labelled_without_verdict": counts["labelled_without_verdict"],
            "precision": tp / (tp + fp) if tp + fp else None, "precision_ci95": list(wilson_interval(tp, tp + fp)),
            "recall": tp / (tp + fn) if tp + fn else None, "recall_ci95": list(wilson_interval(tp, tp + fn))}


# ------------------------------------------------------------------------------ the report
def build_report(episodes: list[RecordedEpisode]) -> dict[str, Any]:
    over = with_records(episodes)
    counted, unlabelled = [], []
    for e in over:
        record = outcome_record(e)
        (counted if record is not None else unlabelled).append((e, record))
    summary = summarize_episodes([r for _, r in counted])
    rows = [episode_row(e) for e in over]
    by_variant: dict[str, dict] = {}
    for row in rows:
        empty = {"episodes": 0, "vlm_calls": 0, "input_tokens": 0, "output_tokens": 0, "cost_usd": 0.0,
                 "robot_time_s": 0.0}
        v = by_variant.setdefault(row["variant"], empty)
        v["episodes"] += 1
        for k in ("vlm_calls", "input_tokens", "output_tokens"):
            v[k] += row[k]
        v["cost_usd"] = None if v["cost_usd"] is None or row["cost_usd"] is None else v["cost_usd"] + row["cost_usd"]
        if v["robot_time_s"] is None or row["robot_time_s"] is None:
            v["robot_time_s"] = None
        else:
            v["robot_time_s"] += row["robot_time_s"]
    labels = Counter(e.labels.episode for e in over if e.labels is not None and e.labels.episode)
    return {
        "schema_version": 1, "episodes": len(episodes), "over": len(over),
        "running_or_cut_short": [e.episode_id for e in episodes if e.record is None],
        "unlabelled": [e.episode_id for e, _ in unlabelled],
        "outcome_sources": dict(Counter(r["outcome_source"] for _, r in counted)),
        "variants": summary, "efficiency": by_variant, "per_episode": rows,
        "operator_vs_vlm": agreement(over), "operator_episode_labels": dict(labels),
        "unlabelled_subgoals": sum(1 for _, r in counted for o in r["subgoals"] if o["cause"] == UNLABELLED),
    }


def _fmt(x, digits=1, pct=False) -> str:
    if x is None:
        return "—"
    return f"{100 * x:.{digits}f}" if pct else f"{x:.{digits}f}"


def markdown(report: dict[str, Any], plots: dict[str, str]) -> str:
    summary = report["variants"]
    lines = ["# Episode report", "",
             f"{report['over']} episodes over ({report['episodes']} found); outcomes from "
             + (", ".join(f"{k} ({n})" for k, n in report["outcome_sources"].items()) or "nothing")
             + (f"; {len(report['unlabelled'])} unlabelled, left out" if report["unlabelled"] else "") + ".", ""]
    if summary:
        lines += ["## Task success and subgoal progress (95 % Wilson intervals)", "", "```",
                  tables.format_table(summary), "```", ""]
        lines += ["## Success by category", "", "| variant | category | n | success % | 95 % CI |",
                  "|---|---|---|---|---|"]
        for v in tables.ordered_variants(summary):
            for cat, b in summary[v]["by_category"].items():
                lines.append(f"| {v} | {cat} | {b['n']} | {_fmt(b['success_rate'], pct=True)} | "
                             f"{_fmt(b['ci95'][0], pct=True)}–{_fmt(b['ci95'][1], pct=True)} |")
        lines += ["", "## Failure causes of unfinished subgoals", "", "```", tables.format_failure_causes(summary),
                  "```", ""]
        if report["unlabelled_subgoals"]:
            lines += [f"{report['unlabelled_subgoals']} subgoals of operator-scored episodes have no label.", ""]
    lines += ["## VLM calls, tokens, cost and robot time (Appendix G)", "",
              "| variant | episodes | VLM calls / ep | tokens in / ep | tokens out / ep | cost / ep (USD) | "
              "robot time / ep (s) |", "|---|---|---|---|---|---|---|"]
    for v, e in report["efficiency"].items():
        n = max(e["episodes"], 1)
        cost = "unknown" if e["cost_usd"] is None else f"{e['cost_usd'] / n:.4f}"
        robot_s = None if e["robot_time_s"] is None else e["robot_time_s"] / n
        lines.append(f"| {v} | {e['episodes']} | {e['vlm_calls'] / n:.1f} | {e['input_tokens'] / n:.0f} | "
                     f"{e['output_tokens'] / n:.0f} | {cost} | {_fmt(robot_s)} |")
    a = report["operator_vs_vlm"]
    lines += ["", "## Operator versus VLM", ""]
    if a["compared"]:
        lines += [f"{a['compared']} labelled subgoals with a VLM verdict: precision of \"complete\" "
                  f"{_fmt(a['precision'], pct=True)} % [{_fmt(a['precision_ci95'][0], pct=True)}, "
                  f"{_fmt(a['precision_ci95'][1], pct=True)}], recall {_fmt(a['recall'], pct=True)} % "
                  f"[{_fmt(a['recall_ci95'][0], pct=True)}, {_fmt(a['recall_ci95'][1], pct=True)}] "
                  f"(TP {a['tp']}, FP {a['fp']}, FN {a['fn']}, TN {a['tn']}).", ""]
    else:
        lines += ["No subgoal has both an operator label and a VLM verdict.", ""]
    if report["operator_episode_labels"]:
        lines += ["Operator episode labels: " + ", ".join(f"{k} {n}" for k, n in
                                                          sorted(report["operator_episode_labels"].items())), ""]
    lines += ["## Episodes", "", "| episode | task | variant | outcome | subgoals | steps | robot s | VLM calls | "
              "operator |", "|---|---|---|---|---|---|---|---|---|"]
    for r in report["per_episode"]:
        label = (r["labels"] or {}).get("episode") or ""
        lines.append(f"| {r['episode_id']} | {r['task_id']} | {r['variant']} | "
                     f"{'success' if r['success'] else 'failure'} ({r['finish_reason']}) | {r['subgoals_done']}/"
                     f"{r['horizon']} | {r['steps_used']}/{r['budget_steps']} | {_fmt(r['robot_time_s'])} | "
                     f"{r['vlm_calls']} | {label} |")
    lines += ["", *[f"![{name}]({file})" for name, file in plots.items()], ""]
    return "\n".join(lines)


def plot_by_category(summary: dict, path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    variants = tables.ordered_variants(summary)
    categories = sorted({c for v in variants for c in summary[v]["by_category"]})
    fig, ax = plt.subplots(figsize=(7.0, 3.8), dpi=110)
    width = 0.8 / max(len(variants), 1)
    for i, v in enumerate(variants):
        blocks = [summary[v]["by_category"].get(c) for c in categories]
        xs = [k + i * width for k in range(len(categories))]
        ys = [100 * b["success_rate"] if b else 0 for b in blocks]
        err = [[100 * (b["success_rate"] - b["ci95"][0]) if b else 0 for b in blocks],
               [100 * (b["ci95"][1] - b["success_rate"]) if b else 0 for b in blocks]]
        ax.bar(xs, ys, width, yerr=err, capsize=2, label=v.replace("_", " "))
    ax.set_xticks([k + width * (len(variants) - 1) / 2 for k in range(len(categories))])
    ax.set_xticklabels([c.replace("_", " ") for c in categories], rotation=20, fontsize=8)
    ax.set_ylabel("task success (%)")
    ax.set_ylim(0, 105)
    ax.legend(fontsize=7)
    ax.set_title("success by category, 95% Wilson intervals", fontsize=9)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def plot_failure_causes(summary: dict, path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    variants = tables.ordered_variants(summary)
    fig, ax = plt.subplots(figsize=(7.0, 3.2), dpi=110)
    left = [0.0] * len(variants)
    for cause in FAILURE_CAUSES:
        shares = []
        for v in variants:
            causes = summary[v]["failure_causes"]
            total = sum(causes.values()) or 1
            shares.append(100 * causes.get(cause, 0) / total)
        ax.barh([v.replace("_", " ") for v in variants], shares, left=left, label=cause.replace("_", " "))
        left = [a + b for a, b in zip(left, shares)]
    ax.set_xlabel("share of unfinished subgoals (%)")
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def thumbnails(episode: RecordedEpisode) -> list[str]:
    """The first and last camera frames of an episode's recording as base64 JPEGs (none without a bag)."""
    if episode.bag is None:
        return []
    from PIL import Image
    from rosbags.highlevel import AnyReader

    from ladder_ros.recording.bag import typestore

    frames = []
    try:
        with AnyReader([episode.bag], default_typestore=typestore()) as reader:
            conns = [c for c in reader.connections if c.topic.endswith(IMAGE_SUFFIX)]
            first = last = None
            for connection, _, raw in reader.messages(connections=conns) if conns else ():
                last = (connection, raw)
                if first is None:
                    first = last
            for item in [x for x in (first, last) if x is not None]:
                msg = reader.deserialize(item[1], item[0].msgtype)
                if msg.encoding not in ("rgb8", "bgr8"):
                    continue
                import numpy as np

                arr = np.frombuffer(bytes(msg.data), dtype=np.uint8).reshape(msg.height, msg.step)[:, :msg.width * 3]
                arr = arr.reshape(msg.height, msg.width, 3)
                if msg.encoding == "bgr8":
                    arr = arr[:, :, ::-1]
                image = Image.fromarray(np.ascontiguousarray(arr))
                image.thumbnail((THUMB_WIDTH, THUMB_WIDTH))
                buf = io.BytesIO()
                image.save(buf, format="JPEG", quality=80)
                frames.append(base64.b64encode(buf.getvalue()).decode())
    except Exception as exc:  # a damaged bag: the report goes on without its pictures
        print(f"ladder-ros report: no thumbnails from {episode.bag}: {exc}", flush=True)
    return frames


def html_page(report: dict[str, Any], md_text: str, plot_files: dict[str, Path],
              episodes: list[RecordedEpisode]) -> str:
    """One self-contained page: tables, plots and thumbnails inline (base64), no outside reference."""
    def img(path: Path) -> str:
        return f'<img alt="{path.stem}" src="data:image/png;base64,{base64.b64encode(path.read_bytes()).decode()}">'

    body = ["<h1>Episode report</h1>"]
    sections = md_text.split("\n## ")
    for section in sections[1:]:
        title, _, text = section.partition("\n")
        body.append(f"<h2>{html.escape(title)}</h2>")
        if title == "Episodes":
            continue
        body.append(f"<pre>{html.escape(text.strip())}</pre>")
    body.append("<h2>Plots</h2>" + "".join(img(p) for p in plot_files.values()))
    by_id = {e.episode_id: e for e in episodes}
    rows = []
    for r in report["per_episode"]:
        thumbs = "".join(f'<img class="t" alt="frame" src="data:image/jpeg;base64,{t}">'
                         for t in thumbnails(by_id[r["episode_id"]]))
        label = html.escape((r["labels"] or {}).get("episode") or "")
        note = html.escape((r["labels"] or {}).get("note") or "")
        ident = f"{html.escape(str(r['episode_id']))}<br><small>{html.escape(str(r['task_id']))} · " \
                f"{html.escape(str(r['variant']))}</small>"
        outcome = f"{'success' if r['success'] else 'failure'}<br><small>{html.escape(str(r['finish_reason']))}</small>"
        rows.append(f"<tr><td>{thumbs}</td><td>{ident}</td><td>{outcome}</td><td>{r['subgoals_done']}/"
                    f"{r['horizon']}</td><td>{_fmt(r['robot_time_s'])}</td><td>{r['vlm_calls']}</td>"
                    f"<td>{label}<br><small>{note}</small></td></tr>")
    body.append("<h2>Episodes</h2><table><tr><th>first / last frame</th><th>episode</th><th>outcome</th>"
                "<th>subgoals</th><th>robot s</th><th>VLM calls</th><th>operator</th></tr>" + "".join(rows)
                + "</table>")
    style = ("body{font-family:sans-serif;margin:2em;max-width:1200px}pre{background:#f6f6f6;padding:.6em;"
             "overflow-x:auto}table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:4px;"
             "vertical-align:top}img{max-width:100%}img.t{width:" + str(THUMB_WIDTH) + "px;margin-right:2px}")
    return (f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>Episode report</title><style>{style}</style>"
            f"</head><body>{''.join(body)}</body></html>\n")


def write_report(root: Path, out: Path) -> dict[str, Any]:
    episodes = load_episodes(root)
    if not episodes:
        raise ConfigError("no episode records, panel records or recordings found", source=str(root))
    report = build_report(episodes)
    out.mkdir(parents=True, exist_ok=True)
    plots: dict[str, Path] = {}
    if report["variants"]:
        plots["success by horizon"] = tables.plot_success_vs_horizon(
            report["variants"], out / "success_by_horizon.png", title="task success by horizon, 95% Wilson bands")
        plots["success by category"] = plot_by_category(report["variants"], out / "success_by_category.png")
        plots["failure causes"] = plot_failure_causes(report["variants"], out / "failure_causes.png")
    md_text = markdown(report, {k: p.name for k, p in plots.items()})
    (out / "report.md").write_text(md_text, encoding="utf-8")
    (out / "summary.json").write_text(json.dumps(report, indent=1, default=str) + "\n", encoding="utf-8")
    (out / "report.html").write_text(html_page(report, md_text, plots, episodes), encoding="utf-8")
    return report


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("report", help="the paper's tables over recorded episodes (Markdown, PNG, HTML)",
                              description=__doc__.split("\n\n")[0])
    p.add_argument("dir", help="folder with episodes.jsonl files, panel records and/or recordings (searched deeply)")
    p.add_argument("--out", default=None, help="output folder (default DIR/report)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    root = Path(args.dir)
    out = Path(args.out) if args.out else root / "report"
    report = write_report(root, out)
    md = (out / "report.md").read_text(encoding="utf-8")
    print(md.split("## VLM calls")[0].strip())
    print(f"\nwrote {out / 'report.md'}, {out / 'report.html'}, {out / 'summary.json'} and the plots "
          f"({report['over']} episodes)")
    return 0
