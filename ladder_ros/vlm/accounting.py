"""Per-call and per-episode accounting of VLM use: calls, tokens, latency, estimated cost.

Appendix G of the paper compares systems by VLM calls, tokens and cost, and conventions treat
timing as data, so every call a component makes is recorded here, failed calls included (a
timed-out call cost wall time; a blocked one cost input tokens). The ledger is what the verifier
node publishes and what goes into the episode record.

Cost is an estimate from a price table with a stated source and date
(``ladder_ros/data/vlm_prices.yaml``). A model missing from the table has an unknown cost:
reported as None, and an episode with any such call has an unknown total, never a zero.
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
from ladder_ros.vlm.backends.base import Reply


@dataclass(frozen=True)
class ModelPrice:
    input_per_million: float
    output_per_million: float

    def __post_init__(self) -> None:
        for name in ("input_per_million", "output_per_million"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
                raise ConfigError(f"{name} must be a non-negative number, got {value!r}")


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
        """Estimated US dollars of one call; None when the model or the input size is unknown.

        Thinking tokens are billed as output tokens (the source's pricing rule); a missing output
        count (a blocked prompt generates nothing) counts as zero.
        """
        price = self.prices.get(model)
        if price is None or input_tokens is None:
            return None
        billed_output = (output_tokens or 0) + (thinking_tokens or 0)
        return (input_tokens * price.input_per_million + billed_output * price.output_per_million) / 1e6

    def estimate_reply(self, reply: Reply) -> float | None:
        """The cost of a reply. A call the server refused on every attempt (HTTP errors only, no
        tokens reported) generated nothing and is not billed: zero for a priced model. A call that
        timed out may have been processed: unknown."""
        usage = reply.usage
        refused = (usage.input_tokens is None and reply.attempts
                   and all(a.status is not None and a.status >= 400 for a in reply.attempts))
        if refused:
            return 0.0 if reply.model in self.prices else None
        return self.estimate(reply.model, usage.input_tokens, usage.output_tokens, usage.thinking_tokens)


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

    @property
    def ok(self) -> bool:
        return self.error is None and self.parse_error is None

    def to_dict(self) -> dict:
        return {
            "purpose": self.purpose, "backend": self.backend, "model": self.model,
            "started_unix_s": self.started_unix_s, "latency_ms": self.latency_ms,
            "input_tokens": self.input_tokens, "output_tokens": self.output_tokens,
            "thinking_tokens": self.thinking_tokens, "cost_usd": self.cost_usd, "attempts": self.attempts,
            "error": self.error, "parse_error": self.parse_error, "raw_reply": self.raw_reply,
            "thoughts": self.thoughts, "finish_reason": self.finish_reason,
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
                   finish_reason=data.get("finish_reason"))


def _percentile(sorted_values: list[float], q: float) -> float:
    """Linear-interpolated percentile of already sorted values (q in [0, 1])."""
    if len(sorted_values) == 1:
        return sorted_values[0]
    position = q * (len(sorted_values) - 1)
    low = math.floor(position)
    high = min(low + 1, len(sorted_values) - 1)
    return sorted_values[low] + (sorted_values[high] - sorted_values[low]) * (position - low)


def summarize(records: Iterable[CallRecord]) -> dict:
    """Totals over calls: what an episode record and the verifier's status carry."""
    records = list(records)
    by_purpose: dict[str, int] = {}
    for record in records:
        by_purpose[record.purpose] = by_purpose.get(record.purpose, 0) + 1

    def total(name: str) -> int:
        return sum(getattr(r, name) or 0 for r in records)

    latencies = sorted(r.latency_ms for r in records)
    unpriced = sum(1 for r in records if r.cost_usd is None)
    return {
        "calls": len(records),
        "calls_by_purpose": by_purpose,
        "failed_calls": sum(1 for r in records if r.error is not None),
        "unparseable_replies": sum(1 for r in records if r.error is None and r.parse_error is not None),
        "attempts": sum(r.attempts for r in records),
        "input_tokens": total("input_tokens"),
        "output_tokens": total("output_tokens"),
        "thinking_tokens": total("thinking_tokens"),
        "latency_ms_total": round(sum(latencies), 3),
        "latency_ms_mean": round(sum(latencies) / len(latencies), 3) if latencies else None,
        "latency_ms_p50": round(_percentile(latencies, 0.5), 3) if latencies else None,
        "latency_ms_max": round(latencies[-1], 3) if latencies else None,
        # Unknown as soon as one call has no price: a partial sum would read as a full one.
        "cost_usd": None if unpriced else round(sum(r.cost_usd for r in records), 6),
        "calls_without_price": unpriced,
    }


class UsageLedger:
    """Collects the call records of one episode (or one benchmark run); thread-safe.

    The verifier node calls :meth:`reset` at episode start, publishes :meth:`summary` after each
    call and writes :meth:`records` into the episode record at the end.
    """

    def __init__(self, prices: PriceTable | None = None):
        self.prices = prices if prices is not None else PriceTable.load()
        self._records: list[CallRecord] = []
        self._lock = threading.Lock()

    def record(self, purpose: str, reply: Reply, parse_error: str | None = None,
               started_unix_s: float | None = None) -> CallRecord:
        """Account one reply; returns its record (with the cost estimate)."""
        usage = reply.usage
        record = CallRecord(
            purpose=purpose, backend=reply.backend, model=reply.model,
            started_unix_s=time.time() - reply.latency_ms / 1000.0 if started_unix_s is None else started_unix_s,
            latency_ms=reply.latency_ms, input_tokens=usage.input_tokens, output_tokens=usage.output_tokens,
            thinking_tokens=usage.thinking_tokens,
            cost_usd=self.prices.estimate_reply(reply),
            attempts=len(reply.attempts) or 1, error=reply.error, parse_error=parse_error,
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
