"""Every node parameter carries its description and range in the node itself, where `ros2 param describe` reads it.

The descriptor of each spec of every executable (product and instruments) is checked directly; one node (depth,
sensor backend: no model to load) is started in-process and asked over its describe_parameters service, as the
ROS tools ask it, so what a running node says is checked too; and a value outside a range is refused at start
with the parameter's name.
"""

from __future__ import annotations

import time

import pytest

pytest.importorskip("rclpy", reason="needs the ROS 2 wheels (requirements/ros.txt)")

import rclpy  # noqa: E402
from rcl_interfaces.msg import ParameterType  # noqa: E402
from rcl_interfaces.srv import DescribeParameters  # noqa: E402
from rclpy.executors import SingleThreadedExecutor  # noqa: E402
from rclpy.parameter import Parameter  # noqa: E402

from ladder_ros.bringup.graph import NODE_PARAMETERS  # noqa: E402
from ladder_ros.nodes.depth import DepthNode  # noqa: E402
from ladder_ros.runtime.parameters import ParameterError, declare_parameters, parameter_descriptor  # noqa: E402
from ladder_ros.specs.param_spec import FLOAT, FLOAT_LIST, INT  # noqa: E402
from ladder_ros.specs.parameters import DEPTH  # noqa: E402

pytestmark = pytest.mark.ros


def _check(descriptor, spec, where: str) -> None:
    """``descriptor`` says what ``spec`` says: description, range (inclusive, continuous), choices, list bounds."""
    assert descriptor.name == spec.name, where
    assert spec.description and descriptor.description.startswith(spec.description), where
    assert descriptor.read_only == spec.read_only, where
    bounded = spec.min is not None or spec.max is not None
    if spec.type == FLOAT and bounded:
        assert not descriptor.integer_range and len(descriptor.floating_point_range) == 1, where
        span = descriptor.floating_point_range[0]
        if spec.min is not None:
            assert span.from_value == spec.min, where
        if spec.max is not None:
            assert span.to_value == spec.max, where
        assert span.step == 0.0, where  # continuous: any value between the bounds
    elif spec.type == INT and bounded:
        assert not descriptor.floating_point_range and len(descriptor.integer_range) == 1, where
        span = descriptor.integer_range[0]
        if spec.min is not None:
            assert span.from_value == spec.min, where
        if spec.max is not None:
            assert span.to_value == spec.max, where
        assert span.step == 0, where
    else:
        assert not descriptor.floating_point_range and not descriptor.integer_range, where
    for choice in spec.choices:
        assert (choice or "'' (empty)") in descriptor.additional_constraints, where
        assert (choice or "'' (empty)") in descriptor.description, where
    if spec.type == FLOAT_LIST:
        if spec.size is not None:
            assert f"{spec.size} values" in descriptor.additional_constraints, where
        if spec.min is not None:
            assert f"each >= {spec.min:g}" in descriptor.additional_constraints, where
        if spec.max is not None:
            assert f"each <= {spec.max:g}" in descriptor.additional_constraints, where


def test_every_spec_of_every_executable_becomes_a_full_descriptor():
    ranged = 0
    for executable, specs in NODE_PARAMETERS.items():
        for spec in specs:
            descriptor = parameter_descriptor(spec)
            _check(descriptor, spec, f"{executable}.{spec.name}")
            ranged += bool(descriptor.floating_point_range or descriptor.integer_range)
    assert ranged > 50  # most numbers are bounded


def test_a_one_sided_bound_leaves_the_other_end_open():
    from ladder_ros.specs.param_spec import ParamSpec

    low_only = parameter_descriptor(ParamSpec("n", INT, 3, "a count", min=1)).integer_range[0]
    assert (low_only.from_value, low_only.to_value) == (1, 2**63 - 1)
    high_only = parameter_descriptor(ParamSpec("x", FLOAT, 0.0, "a level", max=2.5)).floating_point_range[0]
    assert high_only.to_value == 2.5 and high_only.from_value < -1e300


def test_a_running_node_describes_every_parameter_over_its_service(ros):
    namespace = "describe_params"
    node = DepthNode(namespace=namespace, parameter_overrides=[Parameter("backend", value="sensor")])
    client_node = rclpy.create_node("describe_probe", namespace=namespace)
    executor = SingleThreadedExecutor()
    executor.add_node(node)
    executor.add_node(client_node)
    client = client_node.create_client(DescribeParameters, f"/{namespace}/depth/describe_parameters")
    try:
        deadline = time.monotonic() + 30
        while not client.service_is_ready():
            assert time.monotonic() < deadline, "the depth node's describe_parameters service never came up"
            executor.spin_once(timeout_sec=0.05)
        names = [spec.name for spec in DEPTH]
        future = client.call_async(DescribeParameters.Request(names=names))
        deadline = time.monotonic() + 30
        while not future.done():
            assert time.monotonic() < deadline, "describe_parameters never answered"
            executor.spin_once(timeout_sec=0.05)
        descriptors = future.result().descriptors
        assert [d.name for d in descriptors] == names
        for spec, descriptor in zip(DEPTH, descriptors):
            _check(descriptor, spec, f"depth.{spec.name}")
            assert descriptor.type != ParameterType.PARAMETER_NOT_SET, spec.name
        by_name = {d.name: d for d in descriptors}
        # the numbers a reader of `ros2 param describe` sees for one integer and one decimal parameter
        level = by_name["resolution_level"].integer_range[0]
        assert (level.from_value, level.to_value, level.step) == (0, 9, 0)
        period = by_name["diagnostics_period_s"].floating_point_range[0]
        assert (period.from_value, period.to_value, period.step) == (0.05, 60.0, 0.0)
    finally:
        executor.remove_node(client_node)
        executor.remove_node(node)
        client_node.destroy_node()
        node.destroy_node()


@pytest.mark.parametrize("name, value", [("resolution_level", 10), ("resolution_level", -1),
                                         ("diagnostics_period_s", 0.01), ("diagnostics_period_s", 61.0)])
def test_a_value_outside_its_range_stops_the_node_naming_it(ros, name, value):
    node = rclpy.create_node("ranged", namespace="describe_params",
                             parameter_overrides=[Parameter(name, value=value)])
    try:
        with pytest.raises(ParameterError, match=rf"parameter ranged\.{name}: .*out of range"):
            declare_parameters(node, DEPTH)
    finally:
        node.destroy_node()


@pytest.mark.parametrize("name, value", [("resolution_level", 0), ("resolution_level", 9),
                                         ("diagnostics_period_s", 0.05), ("diagnostics_period_s", 60.0),
                                         ("diagnostics_period_s", 0.123)])
def test_the_bounds_and_any_value_between_are_accepted(ros, name, value):
    node = rclpy.create_node("ranged", namespace="describe_params",
                             parameter_overrides=[Parameter(name, value=value)])
    try:
        assert declare_parameters(node, DEPTH)[name] == value
    finally:
        node.destroy_node()
