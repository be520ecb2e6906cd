"""Test double of interbotix_common_modules.common_robot.robot: the global node and its spinning thread."""

from threading import Thread
from typing import Optional

import rclpy
from rclpy.executors import MultiThreadedExecutor
from rclpy.node import Node
from rclpy.task import Future

from interbotix_common_modules.common_robot.exceptions import InterbotixException

_state = {"node": None, "up": False, "executor": None, "thread": None}


class InterbotixRobotNode(Node):
    def __init__(self, node_name: str = 'interbotix_robot_manipulation', namespace: Optional[str] = None,
                 *args, **kwargs) -> None:
        self.node_name = node_name
        self.namespace = namespace
        super().__init__(node_name=node_name, namespace=namespace, *args, **kwargs)

    def wait_until_future_complete(self, future: Future, timeout_sec: float = None) -> None:
        if interbotix_is_up():
            rate = self.create_rate(20.0)
            while not future.done():
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


def robot_startup(node: Optional[InterbotixRobotNode] = None, node_name: str = 'interbotix_robot_manipulation',
                  namespace: Optional[str] = None) -> None:
    if node is None:
        node = get_interbotix_global_node()
        if node is None:
            node = create_interbotix_global_node(node_name=node_name, namespace=namespace)
    if _state["up"]:
        raise InterbotixException('Startup has already been requested.')
    _state["up"] = True
    executor = MultiThreadedExecutor()
    _state["executor"] = executor

    def spin() -> None:
        executor.add_node(node)
        try:
            executor.spin()
        except Exception:  # the context went down with the process
            pass

    _state["thread"] = Thread(target=spin, daemon=True)
    _state["thread"].start()


def robot_shutdown(node: Optional[InterbotixRobotNode] = None) -> None:
    if node is None:
        node = get_interbotix_global_node()
    node.destroy_node()
    rclpy.shutdown()
    _state["thread"].join()
    _state["up"] = False


def create_interbotix_global_node(node_name: str = 'interbotix_robot_manipulation', namespace: str = None,
                                  *args, **kwargs) -> InterbotixRobotNode:
    if _state["node"] is not None:
        raise InterbotixException('Tried to create an Interbotix global node but one already exists.')
    if not rclpy.ok():
        rclpy.init(*args, **kwargs)
    _state["node"] = InterbotixRobotNode(node_name=node_name, namespace=namespace)
    return _state["node"]


def get_interbotix_global_node() -> InterbotixRobotNode:
    return _state["node"]


def interbotix_is_up() -> bool:
    return _state["up"]


def _reset() -> None:
    """Test double only: forget the global node and its thread (a test process builds several robots)."""
    executor = _state["executor"]
    if executor is not None:
        executor.shutdown(timeout_sec=1.0)
    if _state["node"] is not None:
        try:
            _state["node"].destroy_node()
        except Exception:
            pass
    _state.update(node=None, up=False, executor=None, thread=None)
