"""Nodes and an episode client in one executor in this process: the rig of the in-process graph tests and
benchmarks (the nodes are built by the caller; rclpy must be initialised)."""

from __future__ import annotations

from rclpy.executors import SingleThreadedExecutor

from ladder_ros.bringup.client import EpisodeClient


class InProcessGraph:
    """``nodes`` and an :class:`EpisodeClient` under ``namespace``, spun by one executor."""

    def __init__(self, namespace: str, nodes, wait_s: float = 20.0):
        self.nodes = list(nodes)
        self.client = EpisodeClient(namespace=namespace)
        self.executor = SingleThreadedExecutor()
        for node in [*self.nodes, self.client]:
            self.executor.add_node(node)
        self.client.wait_for_graph(self.executor, timeout_s=wait_s)

    def run(self, task_id, variant, seed=0, layout=0, timeout_s=120.0, **start):
        return self.client.run_episode(self.executor, task_id, variant=variant, layout=layout, seed=seed,
                                       timeout_s=timeout_s, **start)

    def wait_for_policies(self, orchestrator, count: int, cap_s: float = 60.0) -> None:
        """Spin until the orchestrator's policy gate sees ``count`` policies, every one ready."""
        gate = orchestrator.policy_gate
        self.client.spin_until(self.executor, lambda: gate.status is not None and len(gate.status.entries()) == count
                               and all(e.ready for e in gate.status.entries().values()), cap_s,
                               f"{count} policies ready")

    def close(self) -> None:
        for node in [*self.nodes, self.client]:
            getattr(node, "close", lambda: None)()
            self.executor.remove_node(node)
            node.destroy_node()
