"""The simulation graph with its episode recorder, every node in this process (tests that read recordings)."""

from __future__ import annotations

from pathlib import Path


def recording_graph_nodes(namespace: str, output_dir: Path, image_size: int) -> list:
    """Sim bridge (built-in tabletop, rendering ``image_size`` px), trigger, orchestrator, policy, verifier and
    the episode recorder writing to ``output_dir`` (the last node); rclpy must be initialised."""
    from rclpy.parameter import Parameter

    from ladder_ros.nodes.episode_recorder.node import EpisodeRecorderNode
    from ladder_ros.nodes.gripper_trigger import GripperTriggerNode
    from ladder_ros.nodes.orchestrator.node import OrchestratorNode
    from ladder_ros.nodes.policy.node import PolicyNode
    from ladder_ros.nodes.sim_bridge.node import SimBridgeNode
    from ladder_ros.nodes.vlm_verifier import VerifierNode

    ns = namespace
    return [SimBridgeNode(namespace=ns, parameter_overrides=[Parameter("render", value=True),
                                                             Parameter("image_size", value=image_size)]),
            GripperTriggerNode(namespace=ns), OrchestratorNode(namespace=ns), PolicyNode(namespace=ns),
            VerifierNode(namespace=ns),
            EpisodeRecorderNode(namespace=ns, parameter_overrides=[Parameter("output_dir", value=str(output_dir))])]


def close_graph(executor, nodes) -> None:
    """Close, remove and destroy ``nodes`` (the recorder flushes its bag on close), then shut rclpy down."""
    import rclpy

    for node in nodes:
        getattr(node, "close", lambda: None)()
        executor.remove_node(node)
        node.destroy_node()
    rclpy.shutdown()
