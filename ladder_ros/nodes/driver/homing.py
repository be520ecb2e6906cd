"""How a robot driver takes its arm home: through the control loop, one joint step per control period.

``robot/home`` and the end of an episode both start the way home; the control tick sends its next step; a stop,
a fault, disarming, an e-stop or a refused step drop what is left of it. Homing opens the gripper and steps at
half the largest joint step per period, and only while the robot is armed and no e-stop is latched. Pure: the
driver hands it its ``arm_home_start``, ``arm_send_home_step`` and ``arm_reseed`` hooks.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ladder_ros.core.safety_supervisor import SafetySupervisor
from ladder_ros.robots.kinematics import joint_path


class Homing:
    """The joint targets still to send to reach home (module docstring).

    ``start`` opens the gripper and returns (current joints, home joints, largest step per period);
    ``send_step(joints, last)`` sends one step; ``arrived`` runs once the last step went out.
    """

    def __init__(self, supervisor: SafetySupervisor, period_s: float, *,
                 start: Callable[[], tuple[np.ndarray, np.ndarray, np.ndarray]],
                 send_step: Callable[[np.ndarray, bool], None], arrived: Callable[[], None], logger: Any):
        self.supervisor = supervisor
        self.period_s = period_s
        self.start = start
        self.send_step = send_step
        self.arrived = arrived
        self.logger = logger
        self.path: list[np.ndarray] = []

    @property
    def active(self) -> bool:
        """Steps are left to send: actions are ignored until the arm is home."""
        return bool(self.path)

    def cancel(self) -> None:
        self.path = []

    def go(self) -> tuple[bool, str]:
        """Open the gripper and plan the way to the home joints (armed, no e-stop); (started, what happens)."""
        if self.supervisor.estopped or not self.supervisor.armed:
            return False, "refused: homing moves the arm; arm the robot first (and release any e-stop)"
        try:
            current, home, max_step = self.start()
            self.path = joint_path(current, home, max_step * 0.5)
        except Exception as exc:
            return False, f"cannot home: {exc!r}"
        return True, f"homing in {len(self.path)} steps of {1000 * self.period_s:.0f} ms"

    def step(self) -> None:
        """Once per control tick while :attr:`active`: send the next step (none once disarmed or e-stopped)."""
        if not self.supervisor.armed or self.supervisor.estopped:
            self.path = []
            return
        target = self.path.pop(0)
        self.send_step(target, not self.path)
        if not self.path:
            self.arrived()
            self.logger.info("home")
