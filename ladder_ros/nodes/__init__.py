"""The graph's nodes: one thin class per node, one node per process; a big node is a package whose node class
composes small objects (docs/graph.md)."""
