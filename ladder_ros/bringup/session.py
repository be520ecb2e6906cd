"""A graph brought up as processes plus an episode client in this process (``run``, ``parity``, benchmarks).

The client joins the graph in the same network-safe environment (same claimed domain id) as the
node processes; rclpy is imported only after that environment is in place.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from ladder_ros.bringup.graph import GraphDescription, NodeLaunch
from ladder_ros.bringup.up import GraphProcesses
from ladder_ros.core.errors import LadderError
from ladder_ros.ros_env import apply_network_safe_environment


STATUS_FOLLOWERS = frozenset({"sim_bridge", "policy", "gripper_trigger", "episode_recorder", "widowx_driver",
                              "franka_driver"})


class GraphSession:
    """Start the nodes, wait until they listen, run episodes through the client, stop everything."""

    def __init__(self, graph: GraphDescription, launches: list[NodeLaunch], log_dir: Path,
                 startup_timeout_s: float = 60.0):
        self.graph = graph
        self.launches = launches
        self.log_dir = log_dir
        self.startup_timeout_s = startup_timeout_s
        self.processes: GraphProcesses | None = None
        self.client: Any = None
        self.executor: Any = None

    def __enter__(self) -> "GraphSession":
        env = apply_network_safe_environment(os.environ)
        import rclpy
        from rclpy.executors import SingleThreadedExecutor
        from rclpy.signals import SignalHandlerOptions

        from ladder_ros.bringup.client import EpisodeClient

        self.processes = GraphProcesses(self.launches, env, self.log_dir)
        self.processes.start()
        try:
            # Ctrl-C is a KeyboardInterrupt here (not a context shut down under the client), so the
            # caller can stop the graph in order and still hear the interrupted episode's final status.
            rclpy.init(signal_handler_options=SignalHandlerOptions.NO)
            self.client = EpisodeClient(namespace=self.graph.namespace)
            self.executor = SingleThreadedExecutor()
            self.executor.add_node(self.client)
            # Nodes that subscribe to the episode status, plus this client.
            followers = sum(1 for launch in self.launches if launch.executable in STATUS_FOLLOWERS)
            deadline = time.monotonic() + self.startup_timeout_s
            status_topic = self.client.resolve_topic_name("episode/status")
            while self.client.count_subscribers(status_topic) < followers + 1 or self.client.status is None:
                self.processes.check_alive()
                if time.monotonic() > deadline:
                    raise LadderError(f"the graph did not come up within {self.startup_timeout_s:.0f} s "
                                      f"(logs: {self.log_dir})")
                self.executor.spin_once(timeout_sec=0.1)
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def run_episode(self, task_id: str, *, variant: str, layout: int, seed: int, timeout_s: float = 900.0):
        """One episode through the graph; a node that dies meanwhile ends it with NodeDied."""
        assert self.client is not None and self.processes is not None
        return self.client.run_episode(self.executor, task_id, variant=variant, layout=layout, seed=seed,
                                       timeout_s=timeout_s, check=self.processes.check_alive)

    def stop(self, final_status_wait_s: float = 5.0):
        """Stop the graph, the orchestrator first; the final status of an episode it interrupted, or None.

        The orchestrator ends a running episode as interrupted before it exits; the client listens
        for that status until the other nodes are stopped too.
        """
        if self.processes is None:
            return None
        client, executor = self.client, self.executor
        outcome = []

        def collect_final_status() -> None:
            if client is None or client.current is None:
                return
            try:
                outcome.append(client.wait_until_over(executor, client.current, final_status_wait_s))
            except LadderError:
                pass  # no final status came (the orchestrator was gone already): the recorder has the record

        self.processes.stop(between=collect_final_status)
        self.processes = None
        return outcome[0] if outcome else None

    def __exit__(self, *exc: object) -> None:
        import rclpy

        try:
            self.stop()
        finally:
            if self.client is not None:
                self.client.destroy_node()
                self.client = None
            rclpy.try_shutdown()
