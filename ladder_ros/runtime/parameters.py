"""A node's ROS parameters declared from their specs (:mod:`ladder_ros.specs.parameters`): with descriptors
(description, range, read-only), so ``ros2 param describe`` shows them and a bad value stops the node at
start-up with one line naming it."""

from __future__ import annotations

from typing import Any, Sequence

from rcl_interfaces.msg import FloatingPointRange, IntegerRange, ParameterDescriptor, ParameterType
from rclpy.node import Node
from rclpy.parameter import Parameter

from ladder_ros.core.errors import LadderError
from ladder_ros.specs.param_spec import BOOL, FLOAT, FLOAT_LIST, INT, STR, STR_LIST, ParamSpec

_PARAM_TYPES = {BOOL: ParameterType.PARAMETER_BOOL, INT: ParameterType.PARAMETER_INTEGER,
                FLOAT: ParameterType.PARAMETER_DOUBLE, STR: ParameterType.PARAMETER_STRING,
                STR_LIST: ParameterType.PARAMETER_STRING_ARRAY, FLOAT_LIST: ParameterType.PARAMETER_DOUBLE_ARRAY}


class ParameterError(LadderError):
    """A parameter override that rclpy refused (wrong type, out of range)."""


def _descriptor(spec: ParamSpec) -> ParameterDescriptor:
    text = spec.description + (f" (one of: {', '.join(spec.choices)})" if spec.choices else "")
    descriptor = ParameterDescriptor(name=spec.name, type=_PARAM_TYPES[spec.type], description=text,
                                     read_only=spec.read_only)
    if spec.type == INT and (spec.min is not None or spec.max is not None):
        descriptor.integer_range = [IntegerRange(from_value=int(spec.min if spec.min is not None else -2**62),
                                                 to_value=int(spec.max if spec.max is not None else 2**62), step=0)]
    if spec.type == FLOAT and (spec.min is not None or spec.max is not None):
        descriptor.floating_point_range = [FloatingPointRange(
            from_value=float(spec.min if spec.min is not None else -1e308),
            to_value=float(spec.max if spec.max is not None else 1e308), step=0.0)]
    return descriptor


def declare_parameters(node: Node, specs: Sequence[ParamSpec]) -> dict[str, Any]:
    """Declare ``specs`` on ``node`` with descriptors and return their checked values.

    rclpy rejects a wrong type or an out-of-range value at declaration; choices and the rest are
    checked here. Either way the error names the node and the parameter.
    """
    values: dict[str, Any] = {}
    for spec in specs:
        try:
            # An empty list has no element type, so a string list is declared by its type.
            default = Parameter.Type.STRING_ARRAY if spec.type == STR_LIST and not spec.default else spec.default
            param = node.declare_parameter(spec.name, default, _descriptor(spec))
        except Exception as exc:  # rclpy raises several exception types for a bad override
            raise ParameterError(f"parameter {node.get_name()}.{spec.name}: {exc}") from None
        value = param.value
        if spec.type == STR_LIST and value is None:
            value = []
        if spec.type in (STR_LIST, FLOAT_LIST):
            value = list(value)
        values[spec.name] = spec.check(value, node.get_name())
    return values
