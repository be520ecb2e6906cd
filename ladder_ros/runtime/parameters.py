"""A node's ROS parameters declared from their specs (:mod:`ladder_ros.specs.parameters`): with descriptors
(description, range, constraints, read-only), so ``ros2 param describe`` shows them and a bad value stops the
node at start-up with one line naming it."""

from __future__ import annotations

import sys
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


# Open ends of a range that has only one bound: the widest values of the message's int64 and float64.
_INT_LOW, _INT_HIGH = -2**63, 2**63 - 1
_FLOAT_LOW, _FLOAT_HIGH = -sys.float_info.max, sys.float_info.max


def _choices(spec: ParamSpec) -> str:
    return "one of: " + ", ".join(c if c else "'' (empty)" for c in spec.choices)


def _constraints(spec: ParamSpec) -> str:
    """What the descriptor's ranges cannot say: the allowed strings, a list's length and the range of its values."""
    parts = [_choices(spec)] if spec.choices else []
    if spec.type == FLOAT_LIST:
        if spec.size is not None:
            parts.append(f"{spec.size} values")
        if spec.min is not None:
            parts.append(f"each >= {spec.min:g}")
        if spec.max is not None:
            parts.append(f"each <= {spec.max:g}")
    return "; ".join(parts)


def parameter_descriptor(spec: ParamSpec) -> ParameterDescriptor:
    """The descriptor ``spec`` is declared with: its description, type, range and read-only flag.

    A number's bounds become the descriptor's range (inclusive, step 0: any value between), which
    rclpy enforces when the parameter is declared or set and ``ros2 param describe`` shows; choices
    and a list's length and value range, which no range can express, go in ``additional_constraints``
    (and choices in the description too, where every tool shows it).
    """
    text = spec.description + (f" ({_choices(spec)})" if spec.choices else "")
    descriptor = ParameterDescriptor(name=spec.name, type=_PARAM_TYPES[spec.type], description=text,
                                     additional_constraints=_constraints(spec), read_only=spec.read_only)
    bounded = spec.min is not None or spec.max is not None
    if spec.type == INT and bounded:
        descriptor.integer_range = [IntegerRange(
            from_value=int(spec.min) if spec.min is not None else _INT_LOW,
            to_value=int(spec.max) if spec.max is not None else _INT_HIGH, step=0)]
    if spec.type == FLOAT and bounded:
        descriptor.floating_point_range = [FloatingPointRange(
            from_value=float(spec.min) if spec.min is not None else _FLOAT_LOW,
            to_value=float(spec.max) if spec.max is not None else _FLOAT_HIGH, step=0.0)]
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
            param = node.declare_parameter(spec.name, default, parameter_descriptor(spec))
        except Exception as exc:  # rclpy raises several exception types for a bad override
            raise ParameterError(f"parameter {node.get_name()}.{spec.name}: {exc}") from None
        value = param.value
        if spec.type == STR_LIST and value is None:
            value = []
        if spec.type in (STR_LIST, FLOAT_LIST):
            value = list(value)
        values[spec.name] = spec.check(value, node.get_name())
    return values
