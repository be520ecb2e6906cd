"""ladder_ros nodes: one class per node, one node per process (see docs/graph.md)."""
