"""Every node executable of the package and the module whose ``main()`` runs it (no imports: names only).

``setup.py``'s console scripts, ``ros2 launch``/``ros2 run`` and ``ladder-ros up`` start a node by its
executable name; the project's own bringup starts it as ``python -m MODULE``. The test and rehearsal
instruments' nodes (the twins, the rehearsal server) are named here like the product's, and loaded by name,
so nothing in the product imports them.
"""

from __future__ import annotations

from ladder_ros.core.errors import unknown_name

EXECUTABLES: dict[str, str] = {
    "sim_bridge": "ladder_ros.nodes.sim_bridge.node",
    "camera": "ladder_ros.nodes.camera",
    "depth": "ladder_ros.nodes.depth",
    "policy": "ladder_ros.nodes.policy.node",
    "gripper_trigger": "ladder_ros.nodes.gripper_trigger",
    "vlm_verifier": "ladder_ros.nodes.vlm_verifier",
    "orchestrator": "ladder_ros.nodes.orchestrator.node",
    "episode_recorder": "ladder_ros.nodes.episode_recorder.node",
    "widowx_driver": "ladder_ros.nodes.driver.widowx",
    "franka_driver": "ladder_ros.nodes.driver.franka",
    "widowx_twin": "ladder_ros.instruments.widowx_twin.node",
    "rehearsal_server": "ladder_ros.instruments.rehearsal.node",
    "franka_twin": "ladder_ros.instruments.franka_twin.node",
}


def node_module(executable: str) -> str:
    """The module that runs ``executable`` (its ``main()``)."""
    try:
        return EXECUTABLES[executable]
    except KeyError:
        raise unknown_name("node executable", executable, sorted(EXECUTABLES)) from None
