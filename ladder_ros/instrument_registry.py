"""The simulation and rehearsal instruments the product can be pointed at, by name (no imports of them).

The product (camera backends, the policy factory, the WidowX driver) is configured with a *name*
(``backend: twin``, ``backend: scripted_expert``, ``api: twin``) and reaches the instrument through
:func:`load_instrument`, which imports it only when it is asked for. The instruments themselves live in
:mod:`ladder_ros.instruments`; nothing in the product imports that package, so a robot's install that
never names an instrument never loads one.
"""

from __future__ import annotations

import importlib
from typing import Any

from ladder_ros.core.errors import unknown_name

# name -> "module:attribute"
INSTRUMENTS: dict[str, str] = {
    "fake_camera": "ladder_ros.instruments.cameras.fake:FakeCamera",
    "twin_camera": "ladder_ros.instruments.cameras.twin:TwinCamera",
    "twin_camera_channel": "ladder_ros.instruments.cameras.shared_frame:default_channel",
    "scripted_expert": "ladder_ros.instruments.expert.scripted:ScriptedExpert",
    "expert_noise": "ladder_ros.instruments.expert.noise:expert_noise",
    "widowx_twin": "ladder_ros.instruments.widowx_twin",
}


def load_instrument(name: str) -> Any:
    """The instrument ``name`` (a class, a function or a module), imported now."""
    try:
        target = INSTRUMENTS[name]
    except KeyError:
        raise unknown_name("instrument", name, sorted(INSTRUMENTS)) from None
    module_name, _, attribute = target.partition(":")
    module = importlib.import_module(module_name)
    return getattr(module, attribute) if attribute else module
