"""The orchestrator's stall watchdog: which input a stuck episode waits for, and when to give up.

An episode advances one control step at a time; when no step advances for ``warn_after_s`` the
orchestrator says in the episode status which input is missing, and after ``abort_after_s`` it
ends the episode with that reason, keeping its record. In lockstep the inputs of step ``t`` come
in a chain, so the first link that has not arrived is the one to name: the policy's action of
``t - 1``, then the sim bridge's joint state (and, for the privileged verifier, privileged state)
of ``t``, then the gripper trigger's events of ``t``. On the wall clock a step is the gripper
trigger's events; they stop when the driver's joint states stop or when the trigger is gone.
No rclpy here.
"""

from __future__ import annotations

from ladder_ros.core.errors import ConfigError

ACTION = "policy/action"
JOINT_STATES = "joint_states"
PRIVILEGED = "sim/privileged_state"
GRIPPER_EVENTS = "gripper/events"
PRODUCERS = {ACTION: "the policy", JOINT_STATES: "the sim bridge or the robot driver",
             PRIVILEGED: "the sim bridge", GRIPPER_EVENTS: "the gripper trigger"}

OK, WARN, ABORT = "", "warn", "abort"


class StallWatch:
    """Times an episode's progress and names the input it waits for."""

    def __init__(self, warn_after_s: float, abort_after_s: float):
        if not 0.0 < warn_after_s < abort_after_s:
            raise ConfigError(f"the stall watchdog needs 0 < warn ({warn_after_s} s) < abort ({abort_after_s} s)")
        self.warn_after_s = float(warn_after_s)
        self.abort_after_s = float(abort_after_s)
        self.progress_at = 0.0
        self.warned = False
        self._steps: dict[str, int] = {}  # lockstep: the newest step seen per input
        self._times: dict[str, float] = {}  # wall clock: when each input was last seen

    def restart(self, now: float) -> None:
        """A new episode: nothing seen yet, the clock starts now."""
        self.progress_at, self.warned = now, False
        self._steps, self._times = {}, {}

    def progressed(self, now: float) -> bool:
        """The episode moved on; True when it had been reported stalled (the report can be cleared)."""
        was, self.warned = self.warned, False
        self.progress_at = now
        return was

    def saw(self, name: str, step: int, now: float) -> None:
        """Input ``name`` of ``step`` arrived."""
        self._steps[name] = max(self._steps.get(name, -1), step)
        self._times[name] = now

    def due(self, now: float) -> str:
        """``warn`` once when stalled past the first bound, ``abort`` past the second, else empty."""
        idle = now - self.progress_at
        if idle >= self.abort_after_s:
            return ABORT
        if idle >= self.warn_after_s and not self.warned:
            self.warned = True
            return WARN
        return OK

    def idle_s(self, now: float) -> float:
        return now - self.progress_at

    def waiting_for_lockstep(self, next_step: int, privileged: bool) -> str:
        """The first input of step ``next_step``'s chain that has not arrived, with its producer."""
        seen = self._steps.get
        if next_step >= 1 and seen(ACTION, -1) < next_step - 1:
            return self._name(ACTION, next_step - 1)
        if seen(JOINT_STATES, -1) < next_step:
            return self._name(JOINT_STATES, next_step)
        if privileged and seen(PRIVILEGED, -1) < next_step:
            return self._name(PRIVILEGED, next_step)
        return self._name(GRIPPER_EVENTS, next_step)

    def waiting_for_wall_clock(self, now: float, next_step: int, fresh_s: float) -> str:
        """Wall clock: no gripper events come; the joint states too, or only the events?"""
        joints = self._times.get(JOINT_STATES)
        if joints is None or now - joints > fresh_s:
            return self._name(JOINT_STATES, next_step)
        return self._name(GRIPPER_EVENTS, next_step)

    @staticmethod
    def _name(topic: str, step: int) -> str:
        return f"{topic} of step {step} (from {PRODUCERS[topic]})"
