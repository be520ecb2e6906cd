"""The WidowX twin: a simulated WidowX 250 6DOF behind the surface of Interbotix's Python API.

The WidowX driver (``ladder_ros/nodes/driver/widowx.py``) talks to the arm through
``interbotix_xs_modules`` (:mod:`ladder_ros.robots.interbotix_arm`). With its parameter
``interbotix_api: twin`` the very same driver code gets this package instead:

* :mod:`.robot`, :mod:`.core`, :mod:`.arm`, :mod:`.gripper` mirror the vendor's
  ``common_robot.robot`` and ``xs_robot.core/arm/gripper`` call for call, with the vendor's
  semantics (read from its ROS 2 sources, cited in each module): the constructor's profile quirk,
  the limit check of ``set_joint_positions`` against the last commanded joints,
  ``capture_joint_positions``, service calls that wait without a timeout, ``grasp``/``release``
  that sleep their delay, the API's own rclpy node;
* :mod:`.xs_sdk` is the xs_sdk side those modules talk to: a small interface (services, command
  topics, joint states) and an in-process xs_sdk that serves it one request at a time, with hangs
  that can be injected;
* :mod:`.motors` is the Dynamixel model behind it: time-based profiles, position and velocity
  limits, torque, hardware errors, reboots that reset the profile registers, stalls, and PWM
  fingers that stop at their limits or on an object;
* :mod:`.remote` and :mod:`.ros_server` carry the xs_sdk interface over ROS (:mod:`.xs_wire`), so
  the motors can live in the ``widowx_twin`` node, coupled to a physics simulation of the scene on
  the wall clock (:mod:`.world`), while the driver's process holds only the API.

docs/widowx_twin.md describes the motor model and what it leaves out, docs/rehearsal.md the twin node.
"""

from __future__ import annotations

from ladder_ros.robots.interbotix_arm import InterbotixApi


def api() -> InterbotixApi:
    """The twin's API, in the shape :class:`~ladder_ros.robots.interbotix_arm.InterbotixArm` takes."""
    from ladder_ros.instruments.widowx_twin import arm, robot

    return InterbotixApi("twin", arm.InterbotixManipulatorXS, robot.InterbotixRobotNode, robot.robot_startup)


def connect_remote(robot_name: str, *, node_name: str, namespace: str = ""):
    """Serve ``robot_name`` from the ``widowx_twin`` node over ROS (:class:`~.remote.RemoteXsSdk`)."""
    from ladder_ros.instruments.widowx_twin import remote, xs_sdk

    return xs_sdk.register(robot_name, remote.RemoteXsSdk(robot_name, node_name=node_name, namespace=namespace))


def reset() -> None:
    """Forget the twin's API node and every simulated xs_sdk (tests that build several drivers in a process)."""
    from ladder_ros.instruments.widowx_twin import robot, xs_sdk

    robot.reset()
    xs_sdk.reset()
