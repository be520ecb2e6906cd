"""The Bradley–Terry ranking of systems across closed blind A/B sessions, and its place in ``ladder-ros report``."""

import json
import math

import numpy as np
import pytest

from ladder_ros.evaluation.ranking import (
    JudgedPair,
    SystemIdentity,
    fit_log_strengths,
    identity_of,
    judged_pairs,
    rank_sessions,
    rank_systems,
    system_name,
)
from ladder_ros.messages import EpisodeLabels
from ladder_ros.panel.ab_session import ABSessionStore, PairFile
from ladder_ros.panel.records import EpisodeFile, EpisodeRecordStore

HASH_PI0 = "0123456789abcdef"
HASH_OCTO = "fedcba9876543210"


def tournament(strengths: dict[str, float], pairs: int, seed: int) -> list[JudgedPair]:
    """Pairs drawn between random systems, each won by the model's probability for the true strengths."""
    rng = np.random.default_rng(seed)
    names = sorted(strengths)
    out = []
    for m in range(pairs):
        i, j = rng.choice(len(names), size=2, replace=False)
        a, b = names[i], names[j]
        p_a = 1.0 / (1.0 + math.exp(strengths[b] - strengths[a]))
        out.append(JudgedPair(a=a, b=b, score=float(rng.random() < p_a), session="s", pair=m))
    return out


# ------------------------------------------------------------------------------ the model
def test_a_synthetic_tournament_recovers_the_order_of_known_strengths():
    strengths = {"best": 1.5, "good": 0.5, "fair": -0.3, "poor": -1.7}
    ranking = rank_systems(tournament(strengths, 600, seed=3))
    assert [s.system for s in ranking.systems] == ["best", "good", "fair", "poor"]
    assert sum(s.score for s in ranking.systems) == pytest.approx(0.0, abs=1e-9)  # anchored: mean 0
    for s in ranking.systems:
        lo, hi = s.ci95
        assert lo < s.score < hi
        truth = strengths[s.system] - np.mean(list(strengths.values()))
        assert lo - 0.2 < truth < hi + 0.2  # the truth sits in (or at the edge of) its interval
        assert s.pairs == s.wins + s.ties + s.losses
    assert sum(s.pairs for s in ranking.systems) == 2 * 600


def test_a_clearly_better_system_is_told_apart_only_after_enough_pairs():
    # better wins 80 % of its pairs: log strength difference ln 4
    few = rank_systems([JudgedPair("better", "worse", s) for s in (1.0, 1.0, 1.0, 0.0)])
    lo, hi = few.systems[0].ci95
    assert few.systems[0].system == "better" and lo <= 0.0 <= hi  # four pairs: a tie is not ruled out
    many = rank_systems(tournament({"better": math.log(4.0), "worse": 0.0}, 200, seed=1))
    better, worse = many.systems
    assert better.system == "better" and better.ci95[0] > 0.0 and worse.ci95[1] < 0.0  # a tie is ruled out
    assert better.ci95[0] > worse.ci95[1]
    assert 2 * better.score == pytest.approx(math.log(4.0), abs=0.5)


def test_ties_count_half_a_win_each():
    pairs = [JudgedPair("a", "b", 1.0), JudgedPair("a", "b", 1.0), JudgedPair("b", "a", 0.5), JudgedPair("a", "b", 0.5)]
    ranking = rank_systems(pairs, prior=1e-9, resamples=10)
    # a won 2 + 2 halves = 3 of 4 games, b 1: the maximum-likelihood ratio of strengths is 3
    assert ranking.score("a") - ranking.score("b") == pytest.approx(math.log(3.0), abs=1e-6)
    a, b = ranking.systems
    assert (a.system, a.wins, a.ties, a.losses, a.pairs) == ("a", 2, 2, 0, 4)
    assert (b.system, b.wins, b.ties, b.losses, b.pairs) == ("b", 0, 2, 2, 4)
    only_ties = rank_systems([JudgedPair("a", "b", 0.5)] * 5 + [JudgedPair("b", "c", 0.5)] * 5)
    assert all(s.score == pytest.approx(0.0, abs=1e-9) for s in only_ties.systems)


def test_a_system_that_always_wins_stays_finite():
    ranking = rank_systems([JudgedPair("champion", "other", 1.0)] * 50)
    champion = ranking.systems[0]
    assert champion.system == "champion" and all(math.isfinite(x) for x in (champion.score, *champion.ci95))
    assert champion.score > 1.0
    # systems that never met a common opponent are linked by the prior, not left at an arbitrary distance
    apart = rank_systems([JudgedPair("a", "b", 1.0)] * 5 + [JudgedPair("c", "d", 1.0)] * 5)
    assert apart.score("a") == pytest.approx(apart.score("c")) and apart.score("b") == pytest.approx(apart.score("d"))
    with pytest.raises(ValueError, match="prior must be positive"):
        fit_log_strengths(np.zeros((2, 2)), np.zeros(2), prior=0.0)


def test_the_ranking_is_deterministic_with_its_seed():
    pairs = tournament({"a": 0.4, "b": 0.0, "c": -0.4}, 60, seed=5)
    one, again = rank_systems(pairs, seed=7), rank_systems(pairs, seed=7)
    assert one.to_dict() == again.to_dict()
    other = rank_systems(pairs, seed=8)
    assert [s.score for s in other.systems] == [s.score for s in one.systems]  # the fit has no randomness
    assert [s.ci95 for s in other.systems] != [s.ci95 for s in one.systems]  # the resamples do
    assert one.resamples == 1000 and one.seed == 7


# ------------------------------------------------------------------------------ naming the systems
def test_a_system_is_named_by_its_policy_config_and_variant():
    record = {"policy": "pi0_bridge", "policy_report": {"policy": "pi0_bridge", "config_hash": HASH_PI0}}
    ident = identity_of({"variant": "proprio_verifier"}, record)
    assert ident == SystemIdentity("proprio_verifier", HASH_PI0, "pi0_bridge")
    assert system_name(ident) == "pi0_bridge@01234567/proprio_verifier"
    # a blind session's record names the policy as its arm: the hash still names the config
    masked = {"policy": "A", "policy_report": {"policy": "A", "config_hash": HASH_PI0}}
    assert system_name(identity_of({"variant": "periodic_trigger"}, masked)) == "policy@01234567/periodic_trigger"
    assert system_name(identity_of({"variant": "periodic_trigger"}, {"policy": "octo"})) == "octo/periodic_trigger"
    assert system_name(identity_of({"variant": "periodic_trigger"}, {"policy": "B"})) == "periodic_trigger"
    # a key that names the policy (a config path) gives the name
    keyed = identity_of({"variant": "proprio_verifier", "policy": "policies/octo_bridge.yaml"}, masked)
    assert system_name(keyed) == "octo_bridge@01234567/proprio_verifier"


def _key(session, pairs):
    """A sealed key: ``pairs`` is a list of (A variant, B variant, preference, episode id A, episode id B)."""
    return {"session": session, "order_seed": 0, "systems": [{"variant": v} for v in sorted({p[0] for p in pairs})],
            "pairs": {str(n): {"A": {"variant": a}, "B": {"variant": b}, "task_id": "t2", "layout": n, "seed": n,
                               "preference": pref, "complete": pref is not None, "episodes": {"A": ea, "B": eb}}
                      for n, (a, b, pref, ea, eb) in enumerate(pairs)}}


def test_a_system_pools_across_two_sessions_by_config_hash_or_policy_name():
    def rec(success, config_hash="", policy="A"):
        report = {"policy": policy, "config_hash": config_hash} if config_hash else {}
        return {"success": success, "policy": policy, "policy_report": report}

    keys = {"s1": _key("s1", [("proprio_verifier", "periodic_trigger", "A", "e1", "e2"),
                              ("periodic_trigger", "proprio_verifier", "B", "e3", "e4")]),
            "s2": _key("s2", [("proprio_verifier", "low_level_policy", "tie", "e5", "e6")])}
    records = {"e1": rec(True, HASH_PI0), "e2": rec(False, HASH_PI0, "B"), "e3": rec(False, HASH_PI0),
               "e4": rec(True, HASH_PI0, "B"), "e5": rec(True, HASH_PI0), "e6": rec(True, HASH_PI0, "B")}
    judged, left_out = judged_pairs(keys, {}, records)
    assert left_out == [] and len(judged) == 3
    ranking = rank_systems(judged)
    by_name = {s.system: s for s in ranking.systems}
    pooled = by_name["policy@01234567/proprio_verifier"]
    assert (pooled.pairs, pooled.wins, pooled.ties, pooled.losses) == (3, 2, 1, 0)
    assert ranking.sessions == ["s1", "s2"] and ranking.systems[0] is pooled
    # another config of the same variant is another system
    records["e5"] = rec(True, HASH_OCTO)
    names = {s.system for s in rank_sessions(keys, {}, records).systems}
    assert {"policy@01234567/proprio_verifier", "policy@fedcba98/proprio_verifier"} <= names
    # records without a config hash pool by the policy name they recorded
    plain = {k: {"success": r["success"], "policy": "pi0_bridge"} for k, r in records.items()}
    by_name = {s.system: s for s in rank_sessions(keys, {}, plain).systems}
    assert by_name["pi0_bridge/proprio_verifier"].pairs == 3


def test_a_pair_without_a_preference_counts_by_its_outcomes():
    keys = {"s": _key("s", [("proprio_verifier", "periodic_trigger", None, "e1", "e2"),
                            ("proprio_verifier", "periodic_trigger", None, "e3", "e4"),
                            ("proprio_verifier", "periodic_trigger", None, "e5", "e6"),
                            ("periodic_trigger", "proprio_verifier", "A", "e7", "e8")])}
    records = {"e1": {"success": True}, "e2": {"success": False}, "e3": {"success": False},
               "e4": {"success": False}, "e5": {"success": True}, "e7": {"success": False}, "e8": {"success": True}}
    judged, left_out = judged_pairs(keys, {}, records)
    assert [(p.a, p.b, p.score, p.source) for p in judged] == [
        ("proprio_verifier", "periodic_trigger", 1.0, "outcomes"),  # success beats failure
        ("proprio_verifier", "periodic_trigger", 0.5, "outcomes"),  # equal outcomes tie
        ("periodic_trigger", "proprio_verifier", 1.0, "operator")]  # the preference over the outcomes
    assert left_out == [{"session": "s", "pair": 2, "why": "no preference, and an episode without an outcome"}]
    # a key without the preference takes the pair file's
    del keys["s"]["pairs"]["2"]["preference"]
    judged, left_out = judged_pairs(keys, {"s": {2: {"preference": "B"}}}, records)
    assert left_out == [] and judged[2].score == 0.0 and judged[2].source == "operator"


# ------------------------------------------------------------------------------ from a lab folder to the report
def _record(episode_id, task_id, success, arm, config_hash):
    """An episode record as the panel keeps it for a blind session: the policy masked as the arm."""
    return {"episode_id": episode_id, "task_id": task_id, "variant": arm, "events": [], "success": success,
            "scored": True, "horizon": 1, "subgoals_done": int(success), "category": "c", "subgoals": [],
            "steps_used": 40, "budget_steps": 200, "finish_reason": "plan_complete",
            "orchestration": {"plan": [{"object": "carrot", "destination": "plate", "text": "carrot on plate"}]},
            "policy": arm, "policy_report": {"policy": arm, "config_hash": config_hash}}


def write_session(root, session, pairs, closed=True):
    """A blind session on disk: ``pairs`` is a list of (A variant, B variant, preference, A success, B success,
    A config hash, B config hash); the key is written only for a closed session."""
    episodes = EpisodeRecordStore(root)
    store = ABSessionStore(root, session)
    key_pairs = {}
    for n, (a, b, preference, a_success, b_success, a_hash, b_hash) in enumerate(pairs):
        ids = {}
        for arm, success, config_hash in (("A", a_success, a_hash), ("B", b_success, b_hash)):
            episode_id = f"{session}-{n}-{arm}"
            entry = {"plan": session, "key": f"t2/pair{n}/{arm}/e{n}/l{n}/s{n}", "task_id": "t2", "layout": n,
                     "seed": n, "episode": n, "ab": {"pair": n, "arm": arm}}
            episodes.save(EpisodeFile(episode_id=episode_id, labels=EpisodeLabels(episode_id=episode_id),
                                      plan_entry=entry, result=_record(episode_id, "t2", success, arm, config_hash)))
            ids[arm] = episode_id
        store.save_pair(PairFile(session=session, pair=n, task_id="t2", layout=n, seed=n, episodes=ids,
                                 preference=preference))
        key_pairs[str(n)] = {"A": {"variant": a}, "B": {"variant": b}, "task_id": "t2", "layout": n, "seed": n,
                             "episodes": ids, "preference": preference, "complete": preference is not None}
    if closed:
        systems = sorted({p[0] for p in pairs} | {p[1] for p in pairs})
        store.write_key({"session": session, "plan_source": "", "systems": [{"variant": v} for v in systems],
                         "order_seed": 0, "closed_unix_s": 1.0, "complete_pairs": len(pairs), "pairs": key_pairs})


def test_the_report_ranks_the_systems_of_the_closed_sessions_and_ignores_an_open_one(tmp_path):
    from ladder_ros.evaluation.recorded_episodes import ab_keys, ab_pairs, load_episodes
    from ladder_ros.evaluation.report_render import write_report
    from ladder_ros.evaluation.report_statistics import build_report

    pv, pt, ll = "proprio_verifier", "periodic_trigger", "low_level_policy"
    write_session(tmp_path, "monday", [(pv, pt, "A", True, False, HASH_PI0, HASH_PI0),
                                       (pt, pv, "B", False, True, HASH_PI0, HASH_PI0),
                                       (pv, pt, None, True, True, HASH_PI0, HASH_PI0)])
    write_session(tmp_path, "tuesday", [(pv, ll, "tie", True, True, HASH_PI0, HASH_PI0)])
    write_session(tmp_path, "thursday", [(pt, ll, "A", True, False, HASH_PI0, HASH_PI0)])
    # still open: no key, so it names no system and counts for nothing (every pair would favour low_level_policy)
    write_session(tmp_path, "wednesday", [(ll, pv, "A", True, False, HASH_PI0, HASH_PI0)] * 3, closed=False)
    episodes = load_episodes(tmp_path)
    keys = ab_keys(tmp_path)
    assert sorted(keys) == ["monday", "thursday", "tuesday"]
    ranking = build_report(episodes, keys, ab_pairs(tmp_path))["ab_ranking"]
    assert ranking["sessions"] == ["monday", "thursday", "tuesday"]
    assert ranking["pairs"] == 5 and ranking["from_outcomes"] == 1
    rows = {r["system"]: r for r in ranking["systems"]}
    assert set(rows) == {f"policy@01234567/{v}" for v in (pv, pt, ll)}
    assert [rows[f"policy@01234567/{pv}"][k] for k in ("pairs", "wins", "ties", "losses")] == [4, 2, 2, 0]
    assert [rows[f"policy@01234567/{ll}"][k] for k in ("pairs", "wins", "ties", "losses")] == [2, 0, 1, 1]
    assert ranking["systems"][0]["system"] == f"policy@01234567/{pv}"
    assert ranking["systems"][-1]["system"] == f"policy@01234567/{ll}"

    report = write_report(tmp_path, tmp_path / "report")
    assert report["ab_ranking"] == json.loads((tmp_path / "report" / "summary.json").read_text())["ab_ranking"]
    md = (tmp_path / "report" / "report.md").read_text()
    assert "## Ranking across blind A/B sessions (Bradley–Terry)" in md
    assert "| system | score | 95 % interval | pairs | wins / ties / losses |" in md
    assert f"| policy@01234567/{pv} | " in md and "| 4 | 2 / 2 / 0 |" in md
    assert "ab_ranking.png" in md and (tmp_path / "report" / "ab_ranking.png").is_file()
    page = (tmp_path / "report" / "report.html").read_text()
    assert "Ranking across blind A/B sessions" in page and 'alt="ab_ranking"' in page


def test_the_report_has_no_ranking_without_a_closed_session(tmp_path):
    from ladder_ros.evaluation.recorded_episodes import ab_keys, ab_pairs, load_episodes
    from ladder_ros.evaluation.report_render import markdown
    from ladder_ros.evaluation.report_statistics import build_report

    write_session(tmp_path, "open", [("proprio_verifier", "periodic_trigger", "A", True, False, HASH_PI0, HASH_PI0)],
                  closed=False)
    report = build_report(load_episodes(tmp_path), ab_keys(tmp_path), ab_pairs(tmp_path))
    assert "ab_ranking" not in report and report["sealed_sessions"] == {"open": 2}
    assert "Ranking across" not in markdown(report, {})
