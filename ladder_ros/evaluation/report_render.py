"""``ladder-ros report DIR``: the paper's tables over recorded episodes, simulated or real.

This module renders them: the numbers of :mod:`ladder_ros.evaluation.report_statistics` (outcomes,
success by horizon and category, failure causes, VLM calls, tokens, cost and robot time, blind A/B
sessions and the ranking of their systems) and :mod:`ladder_ros.evaluation.agreement` (operator versus
VLM) as Markdown tables, plots and one HTML page with the camera frames of every episode and of every
disagreement.

Output: ``report.md``, ``report.html`` (one self-contained page: plots and episode thumbnails
inline), ``summary.json`` and the plots as PNG files, in ``--out`` (default ``DIR/report``).
"""

from __future__ import annotations

import argparse
import base64
import html
import io
import json
from pathlib import Path
from typing import Any, Iterable

from ladder_ros.core.errors import ConfigError
from ladder_ros.core.metrics import FAILURE_CAUSES
from ladder_ros.evaluation import summary_tables as tables
from ladder_ros.evaluation.recorded_episodes import IMAGE_SUFFIX, RecordedEpisode, ab_keys, ab_pairs, load_episodes
from ladder_ros.evaluation.report_statistics import build_report
from ladder_ros.interface_conversions import recorded_document
from ladder_ros.messages import EpisodeStatus, SchemaError

THUMB_WIDTH = 160  # px of an episode thumbnail in the HTML page


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
    if report["void"]:
        lines += [f"{len(report['void'])} void episodes (aborted by the operator or interrupted; their plan entries "
                  "ran again) are left out: " + ", ".join(v["episode_id"] for v in report["void"]) + ".", ""]
    for session, n in report["sealed_sessions"].items():
        lines += [f"Blind A/B session {session} is still open: its {n} episodes are left out until it closes "
                  "(the panel then writes its key).", ""]
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
    lines += ["", *ranking_markdown(report.get("ab_ranking")), *ab_markdown(report["ab_sessions"])]
    lines += ["## Operator versus VLM", "",
              "Per session: the operator's subgoal labels against the VLM's last verdict on each subgoal (positive: "
              "done / complete); precision and recall with 95 % Wilson intervals, Cohen's kappa with a 95 % "
              "percentile bootstrap interval over episodes.", "",
              "| session | subgoals | episodes | precision % | recall % | kappa | TP | FP | FN | TN |",
              "|---|---|---|---|---|---|---|---|---|---|"]
    for session, a in report["operator_vs_vlm_by_session"].items():
        if not a["compared"]:
            continue
        ci = a["kappa_ci95"]
        kappa = _fmt(a["kappa"], 2) + (f" [{ci[0]:.2f}, {ci[1]:.2f}]" if ci else "")
        lines.append(f"| {session} | {a['compared']} | {a['episodes']} | {_fmt(a['precision'], pct=True)} "
                     f"[{_fmt(a['precision_ci95'][0], pct=True)}, {_fmt(a['precision_ci95'][1], pct=True)}] | "
                     f"{_fmt(a['recall'], pct=True)} [{_fmt(a['recall_ci95'][0], pct=True)}, "
                     f"{_fmt(a['recall_ci95'][1], pct=True)}] | {kappa} | {a['tp']} | {a['fp']} | {a['fn']} | "
                     f"{a['tn']} |")
    a = report["operator_vs_vlm"]
    if not a["compared"]:
        lines += ["", "No subgoal has both an operator label and a VLM verdict."]
    lines += [""]
    if a["disagreements"]:
        lines += ["## Disagreements", "", "| episode | subgoal | operator | VLM | asked at step |",
                  "|---|---|---|---|---|"]
        for d in a["disagreements"]:
            lines.append(f"| {d['episode_id']} | {d['plan_index']}: {d['subgoal']} | {d['operator']} | "
                         f"{d['vlm_count']}/{d['required']} {'complete' if d['vlm_complete'] else 'not complete'} "
                         f"({d['kind']}) | {d['step']} |")
        lines += [""]
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


RANKING_TITLE = "Ranking across blind A/B sessions (Bradley–Terry)"


def ranking_markdown(ranking: dict | None) -> list[str]:
    """Every system of the closed blind sessions, best first: its score, 95 % interval and its pairs."""
    if not ranking:
        return []
    lines = [f"## {RANKING_TITLE}", "",
             f"{ranking['pairs']} pairs from {len(ranking['sessions'])} closed sessions"
             + (f" ({ranking['from_outcomes']} without a preference, counted by their outcomes: success beats "
                "failure, equal outcomes tie)" if ranking["from_outcomes"] else "")
             + (f"; {len(ranking['left_out'])} left out ("
                + "; ".join(sorted({x['why'] for x in ranking['left_out']})) + ")" if ranking["left_out"] else "")
             + ". Score: log strength, "
             "mean 0 (a difference d: the better system is preferred with probability 1/(1+e^-d)); ties count half "
             f"a win each; 95 % percentile bootstrap over pairs ({ranking['resamples']} resamples, seed "
             f"{ranking['seed']}).", ""]
    if not ranking["systems"]:
        return lines + ["No judged pair.", ""]
    lines += ["| system | score | 95 % interval | pairs | wins / ties / losses |", "|---|---|---|---|---|"]
    for s in ranking["systems"]:
        lines.append(f"| {s['system']} | {s['score']:+.2f} | [{s['ci95'][0]:+.2f}, {s['ci95'][1]:+.2f}] | "
                     f"{s['pairs']} | {s['wins']} / {s['ties']} / {s['losses']} |")
    return lines + [""]


def plot_ranking(ranking: dict, path: Path) -> Path:
    """The ranking's scores with their 95 % intervals, best at the top."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    systems = list(reversed(ranking["systems"]))
    fig, ax = plt.subplots(figsize=(7.0, 0.9 + 0.35 * max(len(systems), 1)), dpi=110)
    ys = list(range(len(systems)))
    scores = [s["score"] for s in systems]
    err = [[max(0.0, s["score"] - s["ci95"][0]) for s in systems],
           [max(0.0, s["ci95"][1] - s["score"]) for s in systems]]
    ax.errorbar(scores, ys, xerr=err, fmt="o", capsize=3)
    ax.axvline(0.0, color="0.7", linewidth=0.8)
    ax.set_yticks(ys)
    ax.set_yticklabels([f"{s['system']} ({s['pairs']})" for s in systems], fontsize=7)
    ax.set_xlabel("Bradley–Terry score (log strength, mean 0)")
    ax.set_title("ranking across blind A/B sessions, 95% bootstrap intervals (pairs)", fontsize=9)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def ab_markdown(sessions: dict[str, dict]) -> list[str]:
    """The closed blind A/B sessions: both systems, the paired difference, the preferences, the key."""
    lines: list[str] = []
    for name, r in sessions.items():
        a, b = r["systems"]
        lines += [f"## Blind A/B session {name}", "",
                  f"{r['complete_pairs']} of {r['pairs']} pairs complete (both episodes counted and judged); "
                  f"order seed {r['order_seed']}.", "",
                  "| system | episodes | successes | success % | 95 % Wilson CI | preferred |",
                  "|---|---|---|---|---|---|"]
        for system in (a, b):
            x = r["success"][system]
            lines.append(f"| {system} | {x['episodes']} | {x['successes']} | {_fmt(x['success_rate'], pct=True)} | "
                         f"{_fmt(x['ci95'][0], pct=True)}–{_fmt(x['ci95'][1], pct=True)} | "
                         f"{r['preferences'][system]} |")
        lines += [f"| tie | | | | | {r['preferences']['tie']} |", ""]
        p = r["paired_difference"]
        if p:
            lines += [f"{p['a']} − {p['b']}: {p['diff']:+.1f} points [{p['lo']:+.1f}, {p['hi']:+.1f}], paired over "
                      f"{p['tasks']} tasks (Appendix F bootstrap, {p['draws']} draws).", ""]
        lines += ["| pair | task | layout | seed | A | B | A success | B success | preferred | reason |",
                  "|---|---|---|---|---|---|---|---|---|---|"]
        for x in r["revealed"]:
            def won(v):
                return "—" if v is None else ("yes" if v else "no")
            lines.append(f"| {x['pair']} | {x['task_id']} | {x['layout']} | {x['seed']} | {x['A']} | {x['B']} | "
                         f"{won(x['A_success'])} | {won(x['B_success'])} | {x['preferred'] or '—'} | "
                         f"{x['reason'] or ''} |")
        lines += [""]
    return lines


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
        # clipped at 0: a Wilson bound may sit a rounding error past the rate (5.6e-17 above a rate of 0)
        err = [[max(0.0, 100 * (b["success_rate"] - b["ci95"][0])) if b else 0 for b in blocks],
               [max(0.0, 100 * (b["ci95"][1] - b["success_rate"])) if b else 0 for b in blocks]]
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
                thumb = _jpeg(reader.deserialize(item[1], item[0].msgtype))
                if thumb:
                    frames.append(thumb)
    except Exception as exc:  # a damaged bag: the report goes on without its pictures
        print(f"ladder-ros report: no thumbnails from {episode.bag}: {exc}", flush=True)
    return frames


def _jpeg(msg) -> str | None:
    """A camera message as a base64 JPEG thumbnail (None for an encoding that is not RGB)."""
    import numpy as np
    from PIL import Image

    if msg.encoding not in ("rgb8", "bgr8"):
        return None
    arr = np.frombuffer(bytes(msg.data), dtype=np.uint8).reshape(msg.height, msg.step)[:, :msg.width * 3]
    arr = arr.reshape(msg.height, msg.width, 3)
    if msg.encoding == "bgr8":
        arr = arr[:, :, ::-1]
    image = Image.fromarray(np.ascontiguousarray(arr))
    image.thumbnail((THUMB_WIDTH, THUMB_WIDTH))
    buf = io.BytesIO()
    image.save(buf, format="JPEG", quality=80)
    return base64.b64encode(buf.getvalue()).decode()


def frames_at_steps(episode: RecordedEpisode, steps: Iterable[int]) -> dict[int, str]:
    """The camera frames of the given control steps (the observations the VLM was asked about) as base64
    JPEG thumbnails; a step whose frame the recording lacks takes the last frame before it."""
    if episode.bag is None:
        return {}
    from rosbags.highlevel import AnyReader

    from ladder_ros.recording.bag import typestore

    wanted = sorted(set(int(s) for s in steps))
    out: dict[int, str] = {}
    try:
        with AnyReader([episode.bag], default_typestore=typestore()) as reader:
            status = None
            conns = [c for c in reader.connections if c.topic.endswith("/episode/status")]
            for connection, _, raw in reader.messages(connections=conns) if conns else ():
                try:
                    doc = recorded_document(reader.deserialize(raw, connection.msgtype), EpisodeStatus)
                except SchemaError:
                    continue
                if doc.episode_id == episode.episode_id and doc.rate_hz > 0:
                    status = doc
            if status is None:
                return {}
            stamps = {step: status.step_stamp_ns(step) for step in wanted}
            conns = [c for c in reader.connections if c.topic.endswith(IMAGE_SUFFIX)]
            best: dict[int, tuple[int, Any, bytes]] = {}
            for connection, _, raw in reader.messages(connections=conns) if conns else ():
                header = reader.deserialize(raw, connection.msgtype).header.stamp
                msg_stamp = int(header.sec) * 1_000_000_000 + int(header.nanosec)
                for step, target in stamps.items():
                    if msg_stamp <= target and (step not in best or best[step][0] < msg_stamp):
                        best[step] = (msg_stamp, connection, raw)
            for step, (_, connection, raw) in best.items():
                thumb = _jpeg(reader.deserialize(raw, connection.msgtype))
                if thumb:
                    out[step] = thumb
    except Exception as exc:  # a damaged bag: the report goes on without its pictures
        print(f"ladder-ros report: no frames from {episode.bag}: {exc}", flush=True)
    return out


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
        if title in ("Episodes", "Disagreements"):
            continue
        body.append(f"<pre>{html.escape(text.strip())}</pre>")
    by_id = {e.episode_id: e for e in episodes}
    disagreements = report["operator_vs_vlm"]["disagreements"]
    if disagreements:
        frames: dict[str, dict[int, str]] = {}
        for d in disagreements:
            frames.setdefault(d["episode_id"], {})
        for episode_id in frames:
            frames[episode_id] = frames_at_steps(by_id[episode_id], [d["step"] for d in disagreements
                                                                     if d["episode_id"] == episode_id])
        rows = []
        for d in disagreements:
            thumb = frames[d["episode_id"]].get(d["step"])
            picture = f'<img class="t" alt="step {d["step"]}" src="data:image/jpeg;base64,{thumb}">' if thumb else ""
            vlm = (f"{d['vlm_count']}/{d['required']} {'complete' if d['vlm_complete'] else 'not complete'}"
                   f" [{d['source']}]")
            reply = f"<br><small>{html.escape(str(d['raw_reply'])[:400])}</small>" if d.get("raw_reply") else ""
            rows.append(f"<tr><td>{picture}</td><td>{html.escape(d['episode_id'])}<br><small>step {d['step']}"
                        f"</small></td><td>{d['plan_index']}: {html.escape(d['subgoal'])}</td><td>"
                        f"{html.escape(d['operator'])}</td><td>{html.escape(vlm)} ({d['kind']}){reply}</td></tr>")
        body.append("<h2>Disagreements: what the VLM was shown</h2><table><tr><th>frame asked about</th>"
                    "<th>episode</th><th>subgoal</th><th>operator</th><th>VLM</th></tr>" + "".join(rows) + "</table>")
    body.append("<h2>Plots</h2>" + "".join(img(p) for p in plot_files.values()))
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
    report = build_report(episodes, ab_keys(root), ab_pairs(root))
    out.mkdir(parents=True, exist_ok=True)
    plots: dict[str, Path] = {}
    if report["variants"]:
        plots["success by horizon"] = tables.plot_success_vs_horizon(
            report["variants"], out / "success_by_horizon.png", title="task success by horizon, 95% Wilson bands")
        plots["success by category"] = plot_by_category(report["variants"], out / "success_by_category.png")
        plots["failure causes"] = plot_failure_causes(report["variants"], out / "failure_causes.png")
    if (report.get("ab_ranking") or {}).get("systems"):
        plots["ranking"] = plot_ranking(report["ab_ranking"], out / "ab_ranking.png")
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
    ranking = next((section for section in md.split("\n## ") if section.startswith(RANKING_TITLE)), None)
    if ranking:
        print(f"\n## {ranking.strip()}")
    print(f"\nwrote {out / 'report.md'}, {out / 'report.html'}, {out / 'summary.json'} and the plots "
          f"({report['over']} episodes)")
    return 0
