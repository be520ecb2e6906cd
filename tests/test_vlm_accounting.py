"""Per-call and per-episode accounting: tokens, latency, and a cost that is unknown, never zero, when it is."""

from __future__ import annotations

import threading

import pytest

from ladder_ros.core.errors import ConfigError
from ladder_ros.vlm.accounting import Cost, ModelPrice, PriceTable, UsageLedger, format_cost
from ladder_ros.vlm.backends.base import Attempt, CallFailure, FailureKind, Reply, TokenUsage

TABLE = PriceTable({"priced": ModelPrice(1.0, 10.0)}, source="test", as_of="2026-01")


def reply(model="priced", text='{"count": 1}', tokens=(1000, 100, 50), latency=200.0, attempts=None, error=None,
          finish_reason="STOP", thoughts=None):
    return Reply(text=text, backend="gemini", model=model, latency_ms=latency, usage=TokenUsage(*tokens),
                 error=error, finish_reason=finish_reason, thoughts=thoughts,
                 attempts=attempts or (Attempt(latency, 200, None),))


def test_cost_bills_thinking_at_the_output_price():
    # (1000 * $1 + (100 + 50) * $10) per million tokens
    assert TABLE.estimate("priced", 1000, 100, 50) == pytest.approx(2.5e-3)
    assert TABLE.estimate("priced", 1000, None, None) == pytest.approx(1e-3)  # blocked: nothing generated
    assert TABLE.estimate("unpriced", 1000, 100, 50) is None
    assert TABLE.estimate("priced", None, 100, 0) is None
    assert TABLE.cost(reply()) == Cost.of(pytest.approx(2.5e-3))


@pytest.mark.parametrize("case, kwargs, known, fragment", [
    ("every attempt refused: nothing generated, nothing billed",
     dict(text=None, tokens=(None, None, None), error="HTTP 500",
          attempts=(Attempt(5.0, 500, "x"), Attempt(5.0, 503, "y"))), True, None),
    ("an attempt timed out: it may have been billed",
     dict(text=None, tokens=(None, None, None), error="ReadTimeout",
          attempts=(Attempt(5.0, 429, "x"), Attempt(300.0, None, "ReadTimeout"))), False, "attempt 2"),
    ("the first attempt timed out, the second answered: still unknown",
     dict(attempts=(Attempt(90_000.0, None, "ReadTimeout"), Attempt(800.0, 200, None))), False, "attempt 1"),
    ("usage with the prompt count only, although text came back",
     dict(tokens=(1200, None, None)), False, "no output tokens"),
    ("usage without an input count", dict(tokens=(None, 40, None)), False, "no input tokens"),
    ("thoughts came back but no thinking count", dict(tokens=(1000, 40, None), thoughts="hmm"), False,
     "no thinking tokens"),
    ("a blocked prompt: input billed, nothing generated",
     dict(text=None, tokens=(900, None, None), error="prompt blocked: SAFETY"), True, None),
    ("a model without a price", dict(model="unpriced"), False, "no price for model 'unpriced'"),
])
def test_cost_is_unknown_whenever_a_part_of_it_is(case, kwargs, known, fragment):
    cost = TABLE.cost(reply(**kwargs))
    assert cost.known == known, case
    if known:
        assert cost.unknown is None and cost.usd >= 0
    else:
        assert cost.usd is None and fragment in cost.unknown, case


def test_cost_is_typed_known_or_unknown_never_both():
    with pytest.raises(ValueError):
        Cost(usd=None)
    with pytest.raises(ValueError):
        Cost(usd=1.0, unknown="why")


def test_ledger_summary_totals_and_unknown_cost():
    ledger = UsageLedger(TABLE)
    ledger.record("verify", reply(latency=100.0))
    garbled = ledger.record("verify", reply(latency=300.0, text="garbled"),
                            failure=CallFailure(FailureKind.UNPARSEABLE, "no JSON object in the reply"))
    ledger.record("plan", reply(latency=200.0, tokens=(2000, 500, 0)))
    summary = ledger.summary()
    assert summary["calls"] == 3
    assert summary["calls_by_purpose"] == {"verify": 2, "plan": 1}
    assert summary["failed_calls"] == 1 and summary["failed_by_kind"] == {"unparseable": 1}
    assert garbled.parse_error == "no JSON object in the reply" and garbled.error is None and not garbled.ok
    assert (summary["input_tokens"], summary["output_tokens"], summary["thinking_tokens"]) == (4000, 700, 100)
    assert summary["latency_ms_p50"] == 200.0 and summary["latency_ms_max"] == 300.0
    assert summary["cost_usd"] == pytest.approx(2.5e-3 * 2 + (2000 + 5000) / 1e6)
    assert summary["cost_unknown_calls"] == 0 and format_cost(summary).startswith("$")
    ledger.record("verify", reply(model="unpriced"))
    ledger.record("verify", reply(tokens=(1200, None, None)))  # partial usage
    summary = ledger.summary()
    assert summary["cost_usd"] is None and summary["cost_unknown_calls"] == 2
    assert summary["cost_unknown_reasons"] == {"no price for model 'unpriced'": 1,
                                               "the usage reports no output tokens although text came back": 1}
    assert summary["cost_usd_known_part"] == pytest.approx(2.5e-3 * 2 + (2000 + 5000) / 1e6)
    assert format_cost(summary).startswith("unknown (2 call(s)")
    assert ledger.records[1].raw_reply == "garbled"  # kept although it did not parse


def test_a_cut_reply_is_a_failed_call_in_the_ledger():
    ledger = UsageLedger(TABLE)
    record = ledger.record("verify", reply(text='{"count": 2} let me re-check', finish_reason="MAX_TOKENS"))
    assert record.failure_kind == "truncated" and "MAX_TOKENS" in record.error and not record.ok
    assert record.raw_reply.startswith('{"count": 2}')  # recorded, never used
    assert ledger.summary()["failed_by_kind"] == {"truncated": 1}


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
