"""The twin of ``interbotix_common_modules.common_robot.robot``: the API's own rclpy node and its spinning thread.

Follows Interbotix/interbotix_ros_toolboxes, branch rolling (the ROS 2 Humble line is the same
code), commit 4c720477ff36231d6cfc256c6e55b9930537a081,
``interbotix_common_toolbox/interbotix_common_modules/interbotix_common_modules/common_robot/robot.py``:

* :class:`InterbotixRobotNode` is a plain ``rclpy.node.Node``; extra keyword arguments go to
  ``Node`` (so ``use_global_arguments=False`` keeps a process's ``-r __node:=...`` remapping off it).
  Without one, the API creates a process-global node named ``interbotix_robot_manipulation`` with
  no namespace, which a launch's ``__node``/``__ns`` remapping renames like any other node of the
  process.
* :meth:`InterbotixRobotNode.wait_until_future_complete` waits for a service answer with **no
  timeout** by default: once the API is up, it polls at 20 Hz through a ``Rate`` it creates for the
  call and never destroys (each call leaves a 20 Hz timer on the node); before, it spins the node.
* :func:`robot_startup` spins the node in a ``MultiThreadedExecutor`` on a daemon thread; a second
  start-up in the process raises :class:`InterbotixException`.

:func:`reset` is the twin's own addition (tests build several robots in one process).
"""

from __future__ import annotations

from threading import Thread
from typing import Optional

import rclpy
from rclpy.duration import Duration
from rclpy.executors import MultiThreadedExecutor
from rclpy.node import Node

DEFAULT_NODE_NAME = "interbotix_robot_manipulation"
POLL_RATE_HZ = 20.0  # wait_until_future_complete's rate while the API is up


class InterbotixException(Exception):
    """interbotix_common_modules.common_robot.exceptions.InterbotixException."""


_state: dict = {"node": None, "up": False, "executor": None, "thread": None}


class InterbotixRobotNode(Node):
    def __init__(self, node_name: str = DEFAULT_NODE_NAME, namespace: Optional[str] = None, *args, **kwargs) -> None:
        self.node_name = node_name
        self.namespace = namespace
        super().__init__(node_name=self.node_name, namespace=self.namespace, *args, **kwargs)
        self.get_logger().info("Initialized InterbotixRobotNode!")

    def wait_until_future_complete(self, future, timeout_sec: float | None = None) -> None:
        """Block until ``future`` is done; ``timeout_sec`` None or negative: forever (the API's default)."""
        if interbotix_is_up():
            rate = self.create_rate(POLL_RATE_HZ)
            if timeout_sec is None or timeout_sec < 0:
                while not future.done():
                    rate.sleep()
            else:
                start = self.get_clock().now()
                limit = Duration(seconds=timeout_sec)
                while not future.done() and self.get_clock().now() - start < limit:
                    rate.sleep()
        else:
            rclpy.spin_until_future_complete(self, future, timeout_sec=timeout_sec)

    def logdebug(self, message: str, **kwargs):
        self.get_logger().debug(message, **kwargs)

    def loginfo(self, message: str, **kwargs):
        self.get_logger().info(message, **kwargs)

    def logwarn(self, message: str, **kwargs):
        self.get_logger().warning(message, **kwargs)

    def logerror(self, message: str, **kwargs):
        self.get_logger().error(message, **kwargs)

    def logfatal(self, message: str, **kwargs):
        self.get_logger().fatal(message, **kwargs)


def _start(node: InterbotixRobotNode, daemon: bool = True) -> None:
    if interbotix_is_up():
        raise InterbotixException("Startup has already been requested.")
    _state["up"] = True
    executor = MultiThreadedExecutor()
    _state["executor"] = executor

    def spin(node: InterbotixRobotNode) -> None:
        executor.add_node(node=node)
        try:
            executor.spin()
        except Exception:  # the context went down with the process (the upstream loop ends with rclpy.ok())
            pass

    _state["thread"] = Thread(target=spin, args=(node,), daemon=daemon)
    _state["thread"].start()


def robot_startup(node: Optional[InterbotixRobotNode] = None, node_name: str = DEFAULT_NODE_NAME,
                  namespace: Optional[str] = None) -> None:
    """Start the API: spin ``node`` (or the global node, created if need be) on a background thread."""
    if node is None:
        node = get_interbotix_global_node()
        if node is None:
            node = create_interbotix_global_node(node_name=node_name, namespace=namespace)
    _start(node)


def robot_shutdown(node: Optional[InterbotixRobotNode] = None) -> None:
    """Destroy the node and shut rclpy down (the whole process's context, as upstream)."""
    if node is None:
        node = get_interbotix_global_node()
    node.destroy_node()
    rclpy.shutdown()
    if _state["thread"] is not None:
        _state["thread"].join()
    _state["up"] = False


def create_interbotix_global_node(node_name: str = DEFAULT_NODE_NAME, namespace: Optional[str] = None,
                                  *args, **kwargs) -> InterbotixRobotNode:
    if _state["node"] is not None:
        raise InterbotixException("Tried to create an Interbotix global node but one already exists.")
    if not rclpy.ok():
        rclpy.init(*args, **kwargs)
    _state["node"] = InterbotixRobotNode(node_name=node_name, namespace=namespace, *args, **kwargs)
    return _state["node"]


def get_interbotix_global_node() -> Optional[InterbotixRobotNode]:
    return _state["node"]


def interbotix_is_up() -> bool:
    return bool(_state["up"])


def reset() -> None:
    """The twin only: stop the API's executor and forget its global node, so a process can build another robot."""
    executor = _state["executor"]
    if executor is not None:
        executor.shutdown(timeout_sec=1.0)
    node = _state["node"]
    if node is not None:
        try:
            node.destroy_node()
        except Exception:  # already destroyed with its context
            pass
    _state.update(node=None, up=False, executor=None, thread=None)
