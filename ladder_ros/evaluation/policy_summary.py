"""What the low-level policy did over a set of episodes, for the tables of ``sim-eval`` (and ``summary.json``).

A success rate says nothing about *why* a policy failed; a policy whose every chunk was refused
(wrong action dimension, NaN, outside its bounds, a seam jump) is a robot that held still for the
whole evaluation, and the table says so in so many words instead of reading as "0 % policy
success". The numbers come from each record's ``policy_report``
(:class:`~ladder_ros.policies.audit.PolicyReport`).
"""

from __future__ import annotations


def _add(into: dict[str, int], counts: dict) -> None:
    for key, value in (counts or {}).items():
        into[key] = into.get(key, 0) + int(value)


def summarize_policy(records: list[dict]) -> dict:
    """Totals over the records that carry a policy report: steps, held steps and chunks refused, by reason."""
    reports = [r["policy_report"] for r in records if r.get("policy_report")]
    held: dict[str, int] = {}
    rejected: dict[str, int] = {}
    for report in reports:
        _add(held, report.get("held_by_reason"))
        _add(rejected, report.get("rejected_chunks"))
    worst_seam: dict[str, float] = {}
    for report in reports:
        for name, value in (report.get("seam_jump_max") or {}).items():
            worst_seam[name] = max(worst_seam.get(name, 0.0), float(value))
    return {
        "policy": ", ".join(sorted({str(r.get("policy", "")) for r in reports})),
        "episodes": len(reports),
        "steps": sum(int(r.get("steps", 0)) for r in reports),
        "held_steps": sum(int(r.get("held_steps", 0)) for r in reports),
        "held_by_reason": held,
        "chunks": sum(int(r.get("chunks", 0)) for r in reports),
        "rejected_chunks": rejected,
        "episodes_all_rejected": sum(1 for r in reports if r.get("all_chunks_rejected")),
        "seam_jump_max": worst_seam,
        "ood_states": sum(int((r.get("ood") or {}).get("state", 0)) for r in reports),
        "ood_actions": sum(int((r.get("ood") or {}).get("action", 0)) for r in reports),
    }


def format_policy_note(name: str, summary: dict) -> str:
    """The table's lines about the policy (named as its records name it, else ``name``; '' when no record carries
    a report)."""
    if not summary["episodes"]:
        return ""
    name = summary.get("policy") or name
    steps, held = summary["steps"], summary["held_steps"]
    share = f" ({100.0 * held / steps:.1f} %)" if steps else ""
    reasons = ", ".join(f"{k} {v}" for k, v in sorted(summary["held_by_reason"].items())) or "none"
    refused = ", ".join(f"{k} {v}" for k, v in sorted(summary["rejected_chunks"].items())) or "none"
    lines = [f"policy {name}: {held} of {steps} steps held{share} (by reason: {reasons}); "
             f"{summary['chunks']} chunks accepted, refused: {refused}"]
    if summary["ood_states"] or summary["ood_actions"]:
        lines.append(f"policy {name}: out of the training data's distribution: {summary['ood_states']} states, "
                     f"{summary['ood_actions']} chunks")
    if summary["episodes_all_rejected"] == summary["episodes"]:
        lines.append(f"WARNING: every chunk policy {name} returned was refused ({refused}): the robot held still "
                     "in every episode; these results measure no policy at all")
    elif summary["episodes_all_rejected"]:
        lines.append(f"WARNING: in {summary['episodes_all_rejected']} of {summary['episodes']} episodes every "
                     f"chunk of policy {name} was refused")
    return "\n".join(lines)
