"""Per-call and per-episode accounting of VLM use: calls, tokens, latency, estimated cost.

Appendix G of the paper compares systems by VLM calls, tokens and cost, and conventions treat
timing as data, so every call a component makes is recorded here, failed calls included (a
timed-out call cost wall time; a blocked one cost input tokens). The ledger is what the verifier
node publishes and what goes into the episode record.

Cost is an estimate from a price table with a stated source and date
(``ladder_ros/data/vlm_prices.yaml``), and it is a :class:`Cost`: a number, or unknown with the
reason. It is unknown when the model has no price, when the usage the provider reported is partial
(an input count missing, or an output count missing although text came back: treating it as zero
would under-count), or when any attempt of the call may have been billed without a usable response
(an attempt that timed out or lost its connection). Attempts refused with an HTTP error status
generated nothing and cost nothing. A total with any unknown call is unknown, never a partial sum
that reads as a full one; summaries say how many calls are unknown and why.
"""

from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Iterable, Mapping

import yaml

from ladder_ros.core.errors import ConfigError
from ladder_ros.vlm.backends.base import CallFailure, Reply


@dataclass(frozen=True)
class ModelPrice:
    input_per_million: float
    output_per_million: float

    def __post_init__(self) -> None:
        for name in ("input_per_million", "output_per_million"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
                raise ConfigError(f"{name} must be a non-negative number, got {value!r}")


@dataclass(frozen=True)
class Cost:
    """An estimated cost: ``usd`` when known, else None with ``unknown`` saying why."""

    usd: float | None
    unknown: str | None = None

    def __post_init__(self) -> None:
        if (self.usd is None) == (self.unknown is None):
            raise ValueError("a cost is either known (usd) or unknown with a reason, not both or neither")

    @property
    def known(self) -> bool:
        return self.usd is not None

    @classmethod
    def of(cls, usd: float) -> "Cost":
        return cls(usd=usd)

    @classmethod
    def unknown_because(cls, reason: str) -> "Cost":
        return cls(usd=None, unknown=reason)


class PriceTable:
    """Model name -> price, with the source and date the numbers were read from."""

    def __init__(self, prices: Mapping[str, ModelPrice], source: str, as_of: str):
        self.prices = dict(prices)
        self.source = source
        self.as_of = as_of

    @classmethod
    def load(cls, path: str | Path | None = None) -> "PriceTable":
        """Read a price file; the packaged one when ``path`` is None."""
        if path is None:
            text = resources.files("ladder_ros").joinpath("data", "vlm_prices.yaml").read_text("utf-8")
            where = "ladder_ros/data/vlm_prices.yaml"
        else:
            try:
                text = Path(path).read_text("utf-8")
            except OSError as exc:
                raise ConfigError(f"cannot read the price table: {exc}", source=str(path)) from None
            where = str(path)
        data = yaml.safe_load(text) or {}
        for key in ("source", "as_of", "models"):
            if key not in data:
                raise ConfigError(f"missing {key!r}", source=where)
        prices = {}
        for model, entry in (data["models"] or {}).items():
            try:
                prices[str(model)] = ModelPrice(entry["input_per_million"], entry["output_per_million"])
            except (KeyError, TypeError) as exc:
                raise ConfigError(f"malformed price entry: {exc!r}", source=where, key=f"models.{model}") from None
            except ConfigError as exc:
                raise ConfigError(str(exc), source=where, key=f"models.{model}") from None
        return cls(prices, str(data["source"]), str(data["as_of"]))

    def estimate(self, model: str, input_tokens: int | None, output_tokens: int | None,
                 thinking_tokens: int | None) -> float | None:
        """Estimated US dollars of one response; None when the model or the input size is unknown.

        Thinking tokens are billed as output tokens (the source's pricing rule); a missing output
        or thinking count counts as zero here: :meth:`cost` decides when that is not known.
        """
        price = self.prices.get(model)
        if price is None or input_tokens is None:
            return None
        billed_output = (output_tokens or 0) + (thinking_tokens or 0)
        return (input_tokens * price.input_per_million + billed_output * price.output_per_million) / 1e6

    def cost(self, reply: Reply) -> Cost:
        """The cost of a call, attempt by attempt; unknown as soon as one part is.

        * an attempt refused with an HTTP error status generated nothing: free;
        * an attempt that ended without a response (timeout, lost connection, the call deadline)
          may have been processed and billed: unknown;
        * the response: its reported usage; unknown when the input count is missing, when the
          output count is missing although text came back, or when the thinking count is missing
          although thoughts came back (a blocked prompt generates nothing: zero output is right).
        """
        if reply.model not in self.prices:
            return Cost.unknown_because(f"no price for model {reply.model!r}")
        response_seen = False
        for number, attempt in enumerate(reply.attempts, start=1):
            if attempt.status is not None and attempt.status >= 400:
                continue
            if attempt.error is not None:
                return Cost.unknown_because(f"attempt {number} ended without a response; it may have been billed")
            response_seen = True
        if reply.attempts and not response_seen:
            return Cost.of(0.0)  # every attempt refused
        usage = reply.usage
        if usage.input_tokens is None:
            return Cost.unknown_because("the usage reports no input tokens")
        if usage.output_tokens is None and reply.text:
            return Cost.unknown_because("the usage reports no output tokens although text came back")
        if usage.thinking_tokens is None and reply.thoughts:
            return Cost.unknown_because("the usage reports no thinking tokens although thoughts came back")
        usd = self.estimate(reply.model, usage.input_tokens, usage.output_tokens, usage.thinking_tokens)
        return Cost.of(usd) if usd is not None else Cost.unknown_because("no price for this call")


@dataclass(frozen=True)
class CallRecord:
    """One VLM call as the episode record keeps it. ``raw_reply`` is kept even when it did not parse."""

    purpose: str
    backend: str
    model: str
    started_unix_s: float
    latency_ms: float
    input_tokens: int | None
    output_tokens: int | None
    thinking_tokens: int | None
    cost_usd: float | None
    attempts: int
    error: str | None
    parse_error: str | None
    raw_reply: str | None
    thoughts: str | None = None
    finish_reason: str | None = None
    failure_kind: str | None = None  # a FailureKind value; None: the call gave an answer
    cost_unknown: str | None = None  # why cost_usd is None

    @property
    def ok(self) -> bool:
        return self.failure_kind is None and self.error is None and self.parse_error is None

    @property
    def cost(self) -> Cost:
        if self.cost_usd is not None:
            return Cost.of(self.cost_usd)
        return Cost.unknown_because(self.cost_unknown or "unknown")

    def to_dict(self) -> dict:
        return {
            "purpose": self.purpose, "backend": self.backend, "model": self.model,
            "started_unix_s": self.started_unix_s, "latency_ms": self.latency_ms,
            "input_tokens": self.input_tokens, "output_tokens": self.output_tokens,
            "thinking_tokens": self.thinking_tokens, "cost_usd": self.cost_usd, "cost_unknown": self.cost_unknown,
            "attempts": self.attempts, "error": self.error, "parse_error": self.parse_error,
            "failure_kind": self.failure_kind, "raw_reply": self.raw_reply, "thoughts": self.thoughts,
            "finish_reason": self.finish_reason,
        }

    @classmethod
    def from_dict(cls, data: Mapping) -> "CallRecord":
        def opt_int(name: str) -> int | None:
            value = data.get(name)
            return None if value is None else int(value)
        cost = data.get("cost_usd")
        return cls(purpose=str(data["purpose"]), backend=str(data["backend"]), model=str(data["model"]),
                   started_unix_s=float(data.get("started_unix_s", 0.0)),
                   latency_ms=float(data.get("latency_ms", 0.0)), input_tokens=opt_int("input_tokens"),
                   output_tokens=opt_int("output_tokens"), thinking_tokens=opt_int("thinking_tokens"),
                   cost_usd=None if cost is None else float(cost), attempts=int(data.get("attempts", 0)),
                   error=data.get("error"), parse_error=data.get("parse_error"),
                   raw_reply=data.get("raw_reply"), thoughts=data.get("thoughts"),
                   finish_reason=data.get("finish_reason"), failure_kind=data.get("failure_kind"),
                   cost_unknown=data.get("cost_unknown") if cost is None else None)


def _percentile(sorted_values: list[float], q: float) -> float:
    """Linear-interpolated percentile of already sorted values (q in [0, 1])."""
    if len(sorted_values) == 1:
        return sorted_values[0]
    position = q * (len(sorted_values) - 1)
    low = math.floor(position)
    high = min(low + 1, len(sorted_values) - 1)
    return sorted_values[low] + (sorted_values[high] - sorted_values[low]) * (position - low)


def summarize(records: Iterable[CallRecord]) -> dict:
    """Totals over calls: what an episode record and the verifier's status carry.

    ``failed_calls`` counts every call that gave no answer, ``failed_by_kind`` splits them by
    failure kind. ``cost_usd`` is None (unknown) as soon as one call's cost is;
    ``cost_unknown_calls`` and ``cost_unknown_reasons`` say how many and why, and
    ``cost_usd_known_part`` is the sum over the calls whose cost is known, a lower bound only.
    """
    records = list(records)
    by_purpose: dict[str, int] = {}
    failed_by_kind: dict[str, int] = {}
    unknown_reasons: dict[str, int] = {}
    for record in records:
        by_purpose[record.purpose] = by_purpose.get(record.purpose, 0) + 1
        kind = record.failure_kind or (("backend" if record.error else "unparseable")
                                       if record.error or record.parse_error else None)
        if kind is not None:
            failed_by_kind[kind] = failed_by_kind.get(kind, 0) + 1
        if record.cost_usd is None:
            reason = record.cost_unknown or "unknown"
            unknown_reasons[reason] = unknown_reasons.get(reason, 0) + 1

    def total(name: str) -> int:
        return sum(getattr(r, name) or 0 for r in records)

    latencies = sorted(r.latency_ms for r in records)
    unknown = sum(unknown_reasons.values())
    known_part = round(sum(r.cost_usd for r in records if r.cost_usd is not None), 6)
    return {
        "calls": len(records),
        "calls_by_purpose": by_purpose,
        "failed_calls": sum(failed_by_kind.values()),
        "failed_by_kind": dict(sorted(failed_by_kind.items())),
        "attempts": sum(r.attempts for r in records),
        "input_tokens": total("input_tokens"),
        "output_tokens": total("output_tokens"),
        "thinking_tokens": total("thinking_tokens"),
        "latency_ms_total": round(sum(latencies), 3),
        "latency_ms_mean": round(sum(latencies) / len(latencies), 3) if latencies else None,
        "latency_ms_p50": round(_percentile(latencies, 0.5), 3) if latencies else None,
        "latency_ms_max": round(latencies[-1], 3) if latencies else None,
        # Unknown as soon as one call's cost is: a partial sum would read as a full one.
        "cost_usd": None if unknown else known_part,
        "cost_unknown_calls": unknown,
        "cost_unknown_reasons": dict(sorted(unknown_reasons.items())),
        "cost_usd_known_part": known_part,
    }


def format_cost(summary: dict) -> str:
    """The cost line of a summary: the amount, or "unknown" with how many calls and why."""
    if summary.get("cost_usd") is not None:
        return f"${summary['cost_usd']:.6f}"
    reasons = "; ".join(f"{n}x {why}" for why, n in summary.get("cost_unknown_reasons", {}).items())
    return (f"unknown ({summary.get('cost_unknown_calls', 0)} call(s): {reasons}; "
            f"at least ${summary.get('cost_usd_known_part', 0.0):.6f})")


class UsageLedger:
    """Collects the call records of one episode (or one benchmark run); thread-safe.

    The verifier node calls :meth:`reset` at episode start, publishes :meth:`summary` after each
    call and writes :meth:`records` into the episode record at the end.
    """

    def __init__(self, prices: PriceTable | None = None):
        self.prices = prices if prices is not None else PriceTable.load()
        self._records: list[CallRecord] = []
        self._lock = threading.Lock()

    def record(self, purpose: str, reply: Reply, failure: CallFailure | None = None,
               started_unix_s: float | None = None) -> CallRecord:
        """Account one call; returns its record (with the cost estimate).

        ``failure`` is the call's failure as the component decided it (the reply's own, or an
        unparseable answer); None means the reply's own failure, if any.
        """
        usage = reply.usage
        failure = failure if failure is not None else reply.failure
        cost = self.prices.cost(reply)
        call_failure = reply.failure
        record = CallRecord(
            purpose=purpose, backend=reply.backend, model=reply.model,
            started_unix_s=time.time() - reply.latency_ms / 1000.0 if started_unix_s is None else started_unix_s,
            latency_ms=reply.latency_ms, input_tokens=usage.input_tokens, output_tokens=usage.output_tokens,
            thinking_tokens=usage.thinking_tokens, cost_usd=cost.usd, cost_unknown=cost.unknown,
            attempts=len(reply.attempts) or 1,
            error=None if call_failure is None else call_failure.reason,
            parse_error=failure.reason if failure is not None and call_failure is None else None,
            failure_kind=None if failure is None else failure.kind.value,
            raw_reply=reply.text, thoughts=reply.thoughts, finish_reason=reply.finish_reason)
        self.add(record)
        return record

    def add(self, record: CallRecord) -> None:
        with self._lock:
            self._records.append(record)

    def reset(self) -> list[CallRecord]:
        """Start a new episode; returns the records of the one that ended."""
        with self._lock:
            records, self._records = self._records, []
        return records

    @property
    def records(self) -> list[CallRecord]:
        with self._lock:
            return list(self._records)

    def summary(self) -> dict:
        return summarize(self.records)
