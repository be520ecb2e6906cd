"""Per-call and per-episode accounting: tokens, latency, and a cost that is unknown, never zero, when unpriced."""

from __future__ import annotations

import threading

import pytest

from ladder_ros.core.errors import ConfigError
from ladder_ros.vlm.accounting import ModelPrice, PriceTable, UsageLedger
from ladder_ros.vlm.backends.base import Attempt, Reply, TokenUsage

TABLE = PriceTable({"priced": ModelPrice(1.0, 10.0)}, source="test", as_of="2026-01")


def reply(model="priced", text='{"count": 1}', tokens=(1000, 100, 50), latency=200.0, attempts=None, error=None):
    return Reply(text=text, backend="gemini", model=model, latency_ms=latency, usage=TokenUsage(*tokens),
                 error=error, attempts=attempts or (Attempt(latency, 200, None),))


def test_cost_bills_thinking_at_the_output_price():
    # (1000 * $1 + (100 + 50) * $10) per million tokens
    assert TABLE.estimate("priced", 1000, 100, 50) == pytest.approx(2.5e-3)
    assert TABLE.estimate("priced", 1000, None, None) == pytest.approx(1e-3)  # blocked: nothing generated
    assert TABLE.estimate("unpriced", 1000, 100, 50) is None
    assert TABLE.estimate("priced", None, 100, 0) is None


def test_refused_calls_are_free_and_timeouts_unknown():
    refused = reply(text=None, tokens=(None, None, None), error="HTTP 500",
                    attempts=(Attempt(5.0, 500, "x"), Attempt(5.0, 503, "y")))
    assert TABLE.estimate_reply(refused) == 0.0
    timed_out = reply(text=None, tokens=(None, None, None), error="ReadTimeout",
                      attempts=(Attempt(5.0, 429, "x"), Attempt(300.0, None, "ReadTimeout")))
    assert TABLE.estimate_reply(timed_out) is None


def test_ledger_summary_totals_and_unknown_cost():
    ledger = UsageLedger(TABLE)
    ledger.record("verify", reply(latency=100.0))
    ledger.record("verify", reply(latency=300.0, text="garbled"), parse_error="no JSON object in the reply")
    ledger.record("plan", reply(latency=200.0, tokens=(2000, 500, 0)))
    summary = ledger.summary()
    assert summary["calls"] == 3
    assert summary["calls_by_purpose"] == {"verify": 2, "plan": 1}
    assert summary["unparseable_replies"] == 1 and summary["failed_calls"] == 0
    assert (summary["input_tokens"], summary["output_tokens"], summary["thinking_tokens"]) == (4000, 700, 100)
    assert summary["latency_ms_p50"] == 200.0 and summary["latency_ms_max"] == 300.0
    assert summary["cost_usd"] == pytest.approx(2.5e-3 * 2 + (2000 + 5000) / 1e6)
    ledger.record("verify", reply(model="unpriced"))
    summary = ledger.summary()
    assert summary["cost_usd"] is None and summary["calls_without_price"] == 1
    assert ledger.records[1].raw_reply == "garbled"  # kept although it did not parse


def test_ledger_reset_hands_back_the_episode():
    ledger = UsageLedger(TABLE)
    ledger.record("verify", reply())
    ended = ledger.reset()
    assert len(ended) == 1 and ledger.summary()["calls"] == 0
    assert ledger.summary()["cost_usd"] == 0  # no call, nothing spent
    assert ledger.summary()["latency_ms_p50"] is None


def test_ledger_is_thread_safe():
    ledger = UsageLedger(TABLE)
    threads = [threading.Thread(target=lambda: [ledger.record("verify", reply()) for _ in range(200)])
               for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert ledger.summary()["calls"] == 800


def test_call_record_round_trips():
    ledger = UsageLedger(TABLE)
    record = ledger.record("verify", reply())
    assert type(record).from_dict(record.to_dict()) == record


def test_packaged_price_table_names_its_source_and_date():
    table = PriceTable.load()
    assert table.source.startswith("https://") and table.as_of
    assert "gemini-2.5-flash" in table.prices
    assert "gemini-3.7-flash" not in table.prices  # the paper's model: price unknown, reported as such


def test_malformed_price_table_names_the_entry(tmp_path):
    path = tmp_path / "prices.yaml"
    path.write_text("source: x\nas_of: y\nmodels:\n  m:\n    input_per_million: -1\n    output_per_million: 2\n")
    with pytest.raises(ConfigError, match="models.m.*input_per_million"):
        PriceTable.load(path)
    path.write_text("source: x\nmodels: {}\n")
    with pytest.raises(ConfigError, match="as_of"):
        PriceTable.load(path)
