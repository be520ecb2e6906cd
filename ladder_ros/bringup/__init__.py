"""Bringing the graph up: graph descriptions, `ladder-ros up`, the episode client, recordings."""
