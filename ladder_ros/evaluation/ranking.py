"""A ranking of systems across the closed blind A/B sessions of a lab: a Bradley–Terry model over every pair.

One blind session compares two systems; a lab runs many sessions, and the systems meet in different
combinations. The Bradley–Terry model (Bradley & Terry 1952) gives every system a strength ``p`` such
that system ``i`` is judged better than ``j`` with probability ``p_i / (p_i + p_j)``; fitting it over
the pairs of every closed session puts all systems on one scale, even two that never met in a session.

**What one pair says.** The operator's preference when the pair has one: A, B or a tie. A pair without a
preference (a session closed early) counts by the two episodes' outcomes: a success beats a failure, and
equal outcomes (both succeeded, both failed) are a tie. A pair with neither (an episode missing or not
scored) is left out. **A tie counts as half a win for each system** — the usual treatment of ties in
the Bradley–Terry model (as in chess ratings): it is a game played, with half a point each.

**The fit.** Maximum a posteriori by the minorization–maximization iteration of Hunter (2004, "MM
algorithms for generalized Bradley–Terry models", Ann. Statist. 32(1), eq. 3). A small prior keeps every
strength finite: each system also plays one virtual tied game (``prior``), spread evenly over the other
systems. Without it a system that won every pair would have an infinite strength and two groups of
systems that never met could sit at any distance; with it they are finite and shrunk a little together.

**Scores** are natural-log strengths, shifted so that their mean over the ranked systems is 0: a score
difference of ``d`` means the better system is preferred with probability ``1 / (1 + exp(-d))``.
**Intervals**: 95 % percentile bootstrap intervals (Efron & Tibshirani 1993, ch. 13) that resample the
pairs with replacement (1,000 resamples, seed 0 by default), each resample fitted and anchored the same way.

**Which system.** A system is a (policy config, orchestrator variant): named
``<policy>@<config hash[:8]>/<variant>`` after the policy config's digest
(:meth:`ladder_ros.policies.config.PolicyConfig.digest`), so the same checkpoint and config pools across
sessions, and two configs of one name do not. The digest is the one the episode record names (its top-level
``policy_config_hash``, else its ``policy_report``'s ``config_hash``: the config that ran), else the one the
session's sealed key names for that arm (:mod:`ladder_ros.panel.ab_session`: a session that compares policies
writes each arm's policy, config and digest there, and its records name none of them). The policy's name is
the key's, else the record's (``policy``, else the report's). An episode without a config hash is named by its
policy name (``<policy>/<variant>``), and one with neither by its variant alone. The sealed key says which
system ran as A and as B in every pair. The episode records of a blind session name the policy, and in a
session that compares policies also its digest, as the arm ("A", "B"), so such a value is not taken for one.

Pure: numpy only; ``ladder-ros report`` (:mod:`ladder_ros.evaluation.report_statistics`) gathers the
keys, pair files and scored records and renders the result.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any, Iterable, Mapping

import numpy as np

ARMS = ("A", "B")
TIE = 0.5  # A's share of a tied pair: half a win each
RESAMPLES = 1_000
PRIOR_GAMES = 1.0  # virtual tied games of every system, spread over the others (half a win each)
_TOL = 1e-10  # convergence: largest change of a log-strength in one MM step
_MAX_ITER = 100_000
OPERATOR = "operator"  # where a pair's result came from: the operator's preference
OUTCOMES = "outcomes"  # or the two episodes' outcomes


# ------------------------------------------------------------------------------ which system
@dataclass(frozen=True)
class SystemIdentity:
    """What ran as one arm of a pair: the orchestrator variant and, as far as known, the policy config."""

    variant: str
    config_hash: str = ""
    policy: str = ""  # the policy's name (display only when the hash is known)

    @property
    def pool_key(self) -> tuple[str, str, str]:
        """Arms with the same key are one system: the config hash when known, else the policy name."""
        if self.config_hash:
            return ("config", self.config_hash, self.variant)
        return ("name", self.policy, self.variant)


def _policy_name(value: Any) -> str:
    """A policy name as recorded; a masked one (the arm of a blind pair) or a config path's folders dropped."""
    name = str(value or "").strip()
    if name in ARMS:
        return ""
    if name.endswith((".yaml", ".yml")) or "/" in name:
        name = PurePosixPath(name).stem
    return name


def _config_hash(value: Any) -> str:
    """A config digest as recorded; a masked one (the arm of a blind pair) is none."""
    text = str(value or "").strip()
    return "" if text in ARMS else text


def identity_of(system: Mapping[str, Any], record: Mapping[str, Any] | None) -> SystemIdentity:
    """The identity of one arm: ``system`` is the key's entry for it (``{"variant", ...}``, and ``policy``,
    ``config_hash`` where the key names them), ``record`` the arm's episode record (None: not found).
    The record's config hash (what ran: its top-level ``policy_config_hash``, else its report's) wins over the
    key's; the key's policy name over the record's (its top-level ``policy``, else its report's)."""
    record = record or {}
    report = record.get("policy_report") or {}
    config_hash = (_config_hash(record.get("policy_config_hash")) or _config_hash(report.get("config_hash"))
                   or _config_hash(system.get("config_hash")))
    policy = (_policy_name(system.get("policy")) or _policy_name(record.get("policy"))
              or _policy_name(report.get("policy")))
    return SystemIdentity(variant=str(system.get("variant", "")), config_hash=config_hash, policy=policy)


def system_name(identity: SystemIdentity, policy: str | None = None) -> str:
    """``<policy>@<hash[:8]>/<variant>``; ``<policy>/<variant>`` without a hash; ``<variant>`` with neither.
    ``policy`` overrides the identity's name (the name pooled over every arm of that config)."""
    policy = identity.policy if policy is None else policy
    if identity.config_hash:
        return f"{policy or 'policy'}@{identity.config_hash[:8]}/{identity.variant}"
    return f"{policy}/{identity.variant}" if policy else identity.variant


# ------------------------------------------------------------------------------ pairs of the closed sessions
@dataclass(frozen=True)
class JudgedPair:
    """One pair's result: ``score`` is A's share (1 A better, 0.5 tie, 0 B better)."""

    a: str
    b: str
    score: float
    session: str = ""
    pair: int = 0
    source: str = OPERATOR  # OPERATOR (a preference) or OUTCOMES (success beats failure)


def pair_score(preference: str | None, a_success: bool | None, b_success: bool | None) -> tuple[float, str] | None:
    """A's share of the pair and where it came from: the preference if stated, else the outcomes (None:
    neither)."""
    if preference in ARMS:
        return (1.0 if preference == "A" else 0.0), OPERATOR
    if preference == "tie":
        return TIE, OPERATOR
    if a_success is None or b_success is None:
        return None
    return (TIE if bool(a_success) == bool(b_success) else float(bool(a_success))), OUTCOMES


def judged_pairs(keys: Mapping[str, Mapping[str, Any]], pair_files: Mapping[str, Mapping[int, Mapping]] | None,
                 records: Mapping[str, Mapping[str, Any] | None]) -> tuple[list[JudgedPair], list[dict]]:
    """The pairs of every closed session, each with its two systems named, and the pairs left out.

    ``keys``: session -> sealed key (only closed sessions have one: an open session is never read);
    ``pair_files``: session -> pair number -> pair file (the preference when the key does not carry it);
    ``records``: episode id -> the record its outcome counts with (``success``, ``policy_report``; None
    for an episode not scored). Returns the judged pairs and ``{"session", "pair", "why"}`` per pair left out.
    """
    pair_files = pair_files or {}
    arms: list[tuple[str, int, dict, dict]] = []  # session, pair, key entry, {arm: identity}
    left_out: list[dict] = []
    for session, key in sorted(keys.items()):
        pairs = key.get("pairs") or {}
        # what each of the key's systems ran as in this session: an arm whose record is missing takes it when
        # every record of that system agrees
        seen: dict[str, dict[tuple, SystemIdentity]] = defaultdict(dict)
        resolved: dict[tuple[int, str], SystemIdentity | None] = {}
        for number, p in pairs.items():
            for arm in ARMS:
                system = p.get(arm) or {}
                record = records.get(str((p.get("episodes") or {}).get(arm, "")))
                ident = identity_of(system, record) if record is not None else None
                resolved[(int(number), arm)] = ident
                if ident is not None:
                    seen[_system_key(system)].setdefault(ident.pool_key, ident)
        for number, p in sorted(pairs.items(), key=lambda kv: int(kv[0])):
            number = int(number)
            ident = {}
            for arm in ARMS:
                system = p.get(arm) or {}
                found = list(seen.get(_system_key(system), {}).values())
                ident[arm] = resolved[(number, arm)] or (found[0] if len(found) == 1 else identity_of(system, None))
            arms.append((session, number, p, ident))
    # one name per config hash: the name most arms of that config recorded
    names: dict[tuple, Counter] = defaultdict(Counter)
    for _, _, _, ident in arms:
        for i in ident.values():
            if i.policy:
                names[i.pool_key][i.policy] += 1

    def name(i: SystemIdentity) -> str:
        known = names.get(i.pool_key)
        return system_name(i, sorted(known.items(), key=lambda kv: (-kv[1], kv[0]))[0][0] if known else "")

    judged: list[JudgedPair] = []
    for session, number, p, ident in arms:
        episodes = p.get("episodes") or {}
        success = {}
        for arm in ARMS:
            record = records.get(str(episodes.get(arm, "")))
            success[arm] = None if record is None or record.get("success") is None else bool(record["success"])
        # the key's preference is the one sealed with it; a key without one falls back on the pair file
        preference = p.get("preference") or ((pair_files.get(session) or {}).get(number) or {}).get("preference")
        result = pair_score(preference, success["A"], success["B"])
        a, b = name(ident["A"]), name(ident["B"])
        if result is None:
            left_out.append({"session": session, "pair": number,
                             "why": "no preference, and an episode without an outcome"})
        elif ident["A"].pool_key == ident["B"].pool_key:
            left_out.append({"session": session, "pair": number, "why": f"both arms ran {a}"})
        else:
            judged.append(JudgedPair(a=a, b=b, score=result[0], session=session, pair=number, source=result[1]))
    return judged, left_out


def _system_key(system: Mapping[str, Any]) -> str:
    return json.dumps(dict(system), sort_keys=True, default=str)


# ------------------------------------------------------------------------------ the Bradley–Terry fit
def fit_log_strengths(games: np.ndarray, wins: np.ndarray, prior: float = PRIOR_GAMES) -> np.ndarray:
    """Log-strengths by Hunter's MM iteration, for one tournament or a batch of them (resamples).

    ``games[..., i, j]``: games between ``i`` and ``j`` (symmetric, zero diagonal); ``wins[..., i]``: the
    games ``i`` won, a tie counting half. The prior: every system also plays ``prior`` virtual tied games,
    spread evenly over the other systems (``prior`` > 0 keeps every strength finite and links systems that
    never met). The update ``p_i <- W_i / sum_j n_ij / (p_i + p_j)`` (virtual games included) increases the
    posterior at every step (Hunter 2004, eq. 3); the strengths are then rescaled to a geometric mean of 1,
    which the model cannot tell apart. Returns natural-log strengths with mean 0.
    """
    if prior <= 0:
        raise ValueError(f"prior must be positive (it keeps an unbeaten system finite), got {prior}")
    games = np.asarray(games, dtype=np.float64)
    wins = np.asarray(wins, dtype=np.float64)
    k = wins.shape[-1]
    if k < 2:
        return np.zeros_like(wins)
    virtual = prior / (k - 1) * (1.0 - np.eye(k))
    games = games + virtual
    wins = wins + prior / 2.0
    log_p = np.zeros_like(wins)
    for _ in range(_MAX_ITER):
        p = np.exp(log_p)
        new = np.log(wins) - np.log((games / (p[..., :, None] + p[..., None, :])).sum(axis=-1))
        new -= new.mean(axis=-1, keepdims=True)
        change = float(np.abs(new - log_p).max())
        log_p = new
        if change < _TOL:
            break
    return log_p


def _tournament(pairs: list[JudgedPair], index: dict[str, int], weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Games and wins of ``weights[..., m]`` copies of each pair ``m`` (a batch of resamples at once)."""
    k = len(index)
    a = np.array([index[p.a] for p in pairs], dtype=np.intp)
    b = np.array([index[p.b] for p in pairs], dtype=np.intp)
    score = np.array([p.score for p in pairs], dtype=np.float64)
    onehot_a = np.zeros((len(pairs), k))
    onehot_a[np.arange(len(pairs)), a] = 1.0
    onehot_b = np.zeros((len(pairs), k))
    onehot_b[np.arange(len(pairs)), b] = 1.0
    wins = (weights * score) @ onehot_a + (weights * (1.0 - score)) @ onehot_b
    games = np.einsum("...m,mi,mj->...ij", weights, onehot_a, onehot_b)
    return games + np.swapaxes(games, -1, -2), wins


@dataclass
class RankedSystem:
    system: str
    score: float  # natural-log strength, the mean over the ranked systems 0
    ci95: tuple[float, float]
    pairs: int
    wins: int
    ties: int
    losses: int

    def to_dict(self) -> dict[str, Any]:
        return {"system": self.system, "score": self.score, "ci95": list(self.ci95), "pairs": self.pairs,
                "wins": self.wins, "ties": self.ties, "losses": self.losses}


@dataclass
class Ranking:
    """Every system of the closed sessions, best first."""

    systems: list[RankedSystem] = field(default_factory=list)
    pairs: int = 0
    sessions: list[str] = field(default_factory=list)
    from_outcomes: int = 0  # pairs without a preference, counted by their outcomes
    left_out: list[dict] = field(default_factory=list)
    resamples: int = RESAMPLES
    seed: int = 0
    prior: float = PRIOR_GAMES

    def score(self, system: str) -> float:
        return next(s.score for s in self.systems if s.system == system)

    def to_dict(self) -> dict[str, Any]:
        return {"systems": [s.to_dict() for s in self.systems], "pairs": self.pairs, "sessions": list(self.sessions),
                "from_outcomes": self.from_outcomes, "left_out": list(self.left_out), "resamples": self.resamples,
                "seed": self.seed, "prior_games": self.prior, "model": "Bradley-Terry (MM, Hunter 2004)",
                "scale": "natural-log strength, mean 0", "ties": "half a win each"}


def rank_systems(pairs: Iterable[JudgedPair], resamples: int = RESAMPLES, seed: int = 0,
                 prior: float = PRIOR_GAMES, left_out: Iterable[dict] = ()) -> Ranking:
    """Fit the model over ``pairs`` and bootstrap its scores (resampling pairs, ``seed`` numpy's PCG64)."""
    if resamples < 1:
        raise ValueError(f"resamples must be at least 1, got {resamples}")
    pairs = list(pairs)
    names = sorted({p.a for p in pairs} | {p.b for p in pairs})
    index = {n: i for i, n in enumerate(names)}
    ranking = Ranking(pairs=len(pairs), sessions=sorted({p.session for p in pairs}), resamples=resamples, seed=seed,
                      prior=prior, from_outcomes=sum(1 for p in pairs if p.source == OUTCOMES),
                      left_out=list(left_out))
    if not pairs:
        return ranking
    games, wins = _tournament(pairs, index, np.ones(len(pairs)))
    point = fit_log_strengths(games, wins, prior)
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, len(pairs), size=(resamples, len(pairs)))
    weights = np.zeros((resamples, len(pairs)))
    np.add.at(weights, (np.arange(resamples)[:, None], picks), 1.0)
    games_b, wins_b = _tournament(pairs, index, weights)
    boot = fit_log_strengths(games_b, wins_b, prior)
    lo, hi = np.percentile(boot, [2.5, 97.5], axis=0)
    record: dict[str, Counter] = {n: Counter() for n in names}
    for p in pairs:
        for me, share in ((p.a, p.score), (p.b, 1.0 - p.score)):
            record[me]["wins" if share == 1.0 else "losses" if share == 0.0 else "ties"] += 1
    ranking.systems = sorted(
        (RankedSystem(system=n, score=float(point[i]), ci95=(float(lo[i]), float(hi[i])),
                      pairs=sum(record[n].values()), wins=record[n]["wins"], ties=record[n]["ties"],
                      losses=record[n]["losses"]) for n, i in index.items()),
        key=lambda s: (-s.score, s.system))
    return ranking


def rank_sessions(keys: Mapping[str, Mapping[str, Any]], pair_files: Mapping[str, Mapping[int, Mapping]] | None,
                  records: Mapping[str, Mapping[str, Any] | None], resamples: int = RESAMPLES,
                  seed: int = 0, prior: float = PRIOR_GAMES) -> Ranking:
    """The ranking over every closed session (:func:`judged_pairs`, then :func:`rank_systems`)."""
    judged, left_out = judged_pairs(keys, pair_files, records)
    return rank_systems(judged, resamples=resamples, seed=seed, prior=prior, left_out=left_out)
