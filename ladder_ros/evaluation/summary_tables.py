"""Tables and plots of a sim-eval summary, in the layout of the paper's Table 3 and Figure 4."""

from __future__ import annotations

from pathlib import Path
from typing import Mapping, Sequence

from ladder_ros.core.metrics import EPISODE_ERROR, FAILURE_CAUSES

# The order the paper lists its learned-policy variants in (Table 2).
VARIANT_ORDER = ("low_level_policy", "periodic_trigger", "proprio_trigger", "proprio_verifier",
                 "privileged_verifier")


def ordered_variants(summary: Mapping[str, Mapping]) -> list[str]:
    known = [v for v in VARIANT_ORDER if v in summary]
    return known + sorted(v for v in summary if v not in VARIANT_ORDER)


def _pct(x: float) -> str:
    return f"{100 * x:5.1f}"


def format_table(summary: Mapping[str, Mapping], labels: Mapping[str, str] | None = None) -> str:
    """Task success [95 % Wilson CI], subgoal progress and success by horizon, one row per variant."""
    labels = labels or {}
    variants = ordered_variants(summary)
    horizons = sorted({int(h) for v in variants for h in summary[v]["by_horizon"]})
    name_w = max([len("variant")] + [len(v + labels.get(v, "")) for v in variants])
    head = (f"{'variant':<{name_w}}  {'n':>5}  {'success % [95% CI]':>20}  {'progress %':>10}  "
            + "  ".join(f"{'h=' + str(h):>6}" for h in horizons))
    lines = [head, "-" * len(head)]
    for v in variants:
        s = summary[v]
        lo, hi = s["ci95"]
        ci = f"{_pct(s['task_success_rate'])} [{_pct(lo).strip()}, {_pct(hi).strip()}]"
        by_h = {int(h): b for h, b in s["by_horizon"].items()}
        cells = "  ".join(f"{_pct(by_h[h]['success_rate']) if h in by_h else '':>6}" for h in horizons)
        lines.append(f"{v + labels.get(v, ''):<{name_w}}  {s['episodes']:>5}  {ci:>20}  "
                     f"{_pct(s['subgoal_progress']):>10}  {cells}")
    return "\n".join(lines)


def format_failure_causes(summary: Mapping[str, Mapping]) -> str:
    """Share of unfinished subgoals per failure cause (Section 5.2, Figure 6); the column of episodes
    that produced no result only when there are some."""
    variants = ordered_variants(summary)
    causes_shown = [c for c in FAILURE_CAUSES if c != EPISODE_ERROR
                    or any(summary[v]["failure_causes"].get(c, 0) for v in variants)]
    short = {c: c.replace("_", " ") for c in causes_shown}
    name_w = max(len("variant"), *(len(v) for v in variants))
    head = f"{'variant':<{name_w}}  " + "  ".join(f"{short[c]:>26}" for c in causes_shown)
    lines = [head, "-" * len(head)]
    for v in variants:
        causes = summary[v]["failure_causes"]
        total = sum(causes.values()) or 1
        lines.append(f"{v:<{name_w}}  " + "  ".join(
            f"{causes.get(c, 0):>6} ({100 * causes.get(c, 0) / total:5.1f} %)".rjust(26) for c in causes_shown))
    return "\n".join(lines)


def format_paired(pairs: Sequence[Mapping]) -> str:
    lines = ["paired over tasks (Appendix F), points with 95% interval:"]
    for p in pairs:
        lines.append(f"  {p['a']} - {p['b']}: {p['diff']:+.1f} [{p['lo']:+.1f}, {p['hi']:+.1f}]"
                     f" over {p['tasks']} tasks")
    return "\n".join(lines)


def attempt_ends_by_reason(records: Sequence[Mapping]) -> dict[str, dict[str, int]]:
    """Per variant, how many attempts the trigger ended for each reason (``release``, ``timeout``: the
    Franka trigger's 300 steps without a release; ``periodic``), from the episodes' events."""
    counts: dict[str, dict[str, int]] = {}
    for record in records:
        for event in record.get("events", []):
            if event.get("kind") == "attempt_ended":
                per_reason = counts.setdefault(record["variant"], {})
                per_reason[event["reason"]] = per_reason.get(event["reason"], 0) + 1
    return counts


def format_attempt_ends(counts: Mapping[str, Mapping[str, int]]) -> str:
    lines = ["attempt ends by reason:"]
    for v in ordered_variants(counts):
        total = sum(counts[v].values()) or 1
        lines.append(f"  {v}: " + ", ".join(f"{reason} {n} ({100 * n / total:.1f} %)"
                                            for reason, n in sorted(counts[v].items())))
    return "\n".join(lines)


def plot_success_vs_horizon(summary: Mapping[str, Mapping], path: str | Path, title: str = "") -> Path:
    """Task success by horizon per variant, with 95 % Wilson bands (the paper's Figure 4)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    path = Path(path)
    fig, ax = plt.subplots(figsize=(6.4, 4.2), dpi=120)
    variants = ordered_variants(summary)
    styles = ("-", "--", "-.", ":", "-")
    all_h: set[int] = set()
    for i, v in enumerate(variants):
        by_h = sorted((int(h), b) for h, b in summary[v]["by_horizon"].items())
        all_h.update(h for h, _ in by_h)
        # a small sideways offset per variant keeps equal values from hiding each other
        offset = 0.06 * (i - (len(variants) - 1) / 2)
        xs = [h + offset for h, _ in by_h]
        ys = [100 * b["success_rate"] for _, b in by_h]
        lo = [100 * b["ci95"][0] for _, b in by_h]
        hi = [100 * b["ci95"][1] for _, b in by_h]
        (line,) = ax.plot(xs, ys, marker="o", linestyle=styles[i % len(styles)], label=v.replace("_", " "))
        ax.fill_between(xs, lo, hi, color=line.get_color(), alpha=0.15, linewidth=0)
    ax.set_xticks(sorted(all_h))
    ax.set_xlabel("task horizon (subgoals)")
    ax.set_ylabel("task success (%)")
    ax.set_ylim(-2, 102)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    if title:
        ax.set_title(title, fontsize=8, wrap=True)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path
