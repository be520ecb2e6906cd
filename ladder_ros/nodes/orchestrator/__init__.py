"""The orchestrator node: the LADDER loop on the graph (plan, attempt, verify, advance, retry, re-queue)."""
