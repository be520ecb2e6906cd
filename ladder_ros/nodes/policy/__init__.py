"""The policy node: turns observations into ``policy/action`` with the configured low-level policy."""
