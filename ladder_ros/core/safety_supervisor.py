"""Whether a checked command may move the arm now: arming, the latched e-stop, the watchdog, the verification hold.

The robot drivers put every command through the action filter (:mod:`ladder_ros.core.safety`:
bounds, joint limits, the workspace box) and then through this supervisor, which decides what the
arm does with a command that passed:

* **Dry run by default.** A driver starts disarmed: commands are computed, checked and recorded,
  and nothing moves, until the operator arms the robot. Disarming returns to dry run at once.
* **The e-stop latches.** It stops the arm and disarms it; while it is latched the robot cannot be
  armed. Releasing it leaves the robot disarmed: arming again is a second, deliberate act.
* **The watchdog holds the arm when commands stop.** An armed arm that received no command for
  ``watchdog_s`` is stopped once (counted); the next command lifts the hold.
* **The verification hold** (optional, ``hold_while_verifying``): while the orchestrator waits for
  a verification, commands are not sent and the arm holds still, as the simulator pauses.
* **Faults** (a reflex, a motor error, a stalled joint, a gripper that did not arrive, a vendor
  call past its deadline, a hold the arm refused and torque had to go off) disarm, counted by kind,
  and block arming until the driver has confirmed a recovery (:meth:`SafetySupervisor.recovered`).
* **Not ready**: the driver can block arming while something it must check is unchecked or wrong
  (the WidowX's motion profile not read back yet, or read back different; a recovery running).
* **Stopping is reported as it is**: after an e-stop, a watchdog stop or a fault the state says
  the arm is *stopping* until the driver has measured it at rest (:meth:`SafetySupervisor.note_rest`),
  and a stop that did not go as asked (a refused hold, torque turned off instead) is reported in
  those words (:meth:`SafetySupervisor.note_stop`), never as "holds".

E-stops, watchdog stops and faults are interventions, counted with the filter's counts (one set of
counts per episode, in the episode record). Commands held because the robot is disarmed or a
verification is pending are not interventions (nothing was wrong with them); they are counted
apart, in :attr:`SafetySupervisor.holds`. No rclpy here; time is passed in (monotonic seconds).
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass
from typing import Any

from ladder_ros.core.errors import ConfigError
from ladder_ros.core.safety import ESTOP, ROBOT_ERROR, WATCHDOG, InterventionCounts


class Permission(str, enum.Enum):
    """What happens to a command that passed the filter."""

    MOVE = "move"  # sent to the arm
    DRY_RUN = "dry_run"  # disarmed: computed and recorded, not sent
    ESTOP = "estop"  # e-stop latched: not sent
    VERIFYING = "verifying"  # a verification is pending and the driver holds meanwhile: not sent


# Levels of the robot/safety_state message (diagnostic_msgs/DiagnosticStatus): OK armed, WARN dry run,
# ERROR e-stop latched.
OK, WARN, ERROR = 0, 1, 2


@dataclass(frozen=True)
class SupervisorConfig:
    """``watchdog_s``: hold the arm when no command came for this long (s); ``hold_while_verifying``: see above."""

    watchdog_s: float
    hold_while_verifying: bool = False

    def __post_init__(self) -> None:
        if isinstance(self.watchdog_s, bool) or not isinstance(self.watchdog_s, (int, float)) \
                or not math.isfinite(self.watchdog_s) or self.watchdog_s <= 0:
            raise ConfigError(f"watchdog_s must be a positive number of seconds, got {self.watchdog_s!r}")
        if not isinstance(self.hold_while_verifying, bool):
            raise ConfigError(f"hold_while_verifying must be true or false, got {self.hold_while_verifying!r}")


class SafetySupervisor:
    """The arm's safety state machine; every change leaves a one-line ``detail``."""

    def __init__(self, counts: InterventionCounts, config: SupervisorConfig):
        if not isinstance(counts, InterventionCounts):
            raise ConfigError(f"counts must be InterventionCounts, got {type(counts).__name__}")
        self.counts = counts
        self.config = config
        self.armed = False
        self.estopped = False
        self.verifying = False
        self.watchdog_holding = False
        self.last_command_at: float | None = None
        self.holds: dict[str, int] = {Permission.DRY_RUN.value: 0, Permission.ESTOP.value: 0,
                                      Permission.VERIFYING.value: 0}
        self.reason = "dry run: arm the robot to move"
        self.recovery_required: str | None = None  # a fault's reason until a recovery is confirmed
        self.not_ready: str | None = None  # why the driver cannot arm yet
        self.stop_report = ""  # how the last stop went
        self.at_rest: bool | None = None  # after a stop: measured at rest yet (None: no stop to report)
        self._past_interventions = 0  # interventions of earlier episodes

    # ------------------------------------------------------------------ operator
    def arm(self) -> tuple[bool, str]:
        """Arm the robot, unless an e-stop is latched, a fault awaits recovery or the driver is not ready."""
        if self.estopped:
            return False, "refused: the e-stop is latched; release it first"
        if self.recovery_required is not None:
            return False, f"refused: {self.recovery_required}; call robot/recover first"
        if self.not_ready is not None:
            return False, f"refused: {self.not_ready}"
        if self.armed:
            return True, "already armed"
        self.armed = True
        self.watchdog_holding = False
        self.last_command_at = None  # the watchdog starts with the first command after arming
        self.stop_report = ""
        self.at_rest = None
        self.reason = "armed"
        return True, "armed"

    def disarm(self, why: str = "disarmed by the operator") -> tuple[bool, str]:
        """Back to dry run (always allowed)."""
        was = self.armed
        self.armed = False
        if not self.estopped and self.recovery_required is None:
            self.reason = f"dry run: {why}"
        return True, "disarmed" if was else "already disarmed (dry run)"

    def estop(self, why: str = "e-stop by the operator") -> str:
        """Stop and latch; counted once per latch (a second press while latched changes nothing)."""
        if self.estopped:
            return "e-stop already latched"
        self.estopped = True
        self.armed = False
        self.counts.count(ESTOP)
        self.reason = f"E-STOP: {why}"
        self.stop_report, self.at_rest = "", False
        return "e-stop latched: the arm is being stopped; release it, then arm again"

    def release(self) -> tuple[bool, str]:
        """Release a latched e-stop; the robot stays disarmed."""
        if not self.estopped:
            return True, "no e-stop latched"
        self.estopped = False
        self.reason = "dry run: e-stop released; arm the robot to move" if self.recovery_required is None \
            else f"FAULT: {self.recovery_required}"
        return True, "e-stop released; the robot stays disarmed until armed again"

    def fault(self, kind: str, why: str) -> None:
        """A fault of ``kind`` (an intervention kind): counted, disarmed, arming blocked until :meth:`recovered`."""
        self.counts.count(kind)
        self.armed = False
        self.recovery_required = f"{kind}: {why}"
        if not self.estopped:
            self.reason = f"FAULT: {kind}: {why}"
            self.stop_report, self.at_rest = "", False

    def robot_error(self, why: str) -> None:
        """The arm reported an error (a reflex, a control exception): a fault."""
        self.fault(ROBOT_ERROR, why)

    def recovered(self, message: str) -> None:
        """The driver confirmed a recovery: arming is possible again (the robot stays disarmed)."""
        self.recovery_required = None
        if not self.estopped:
            self.reason = f"dry run: recovered ({message}); arm the robot to move"

    def set_not_ready(self, reason: str | None) -> None:
        """Block arming for ``reason`` (None: ready); an armed robot is disarmed."""
        self.not_ready = reason
        if reason is not None and self.armed:
            self.disarm(reason)

    def note_stop(self, report: str) -> None:
        """How the last stop went (``"held at the measured joints"``, ``"hold refused; torque off"``)."""
        self.stop_report = report

    def note_rest(self, at_rest: bool) -> None:
        """Whether the arm is measured at rest (after a stop)."""
        self.at_rest = bool(at_rest)

    # ------------------------------------------------------------------ commands
    def set_verifying(self, pending: bool) -> None:
        self.verifying = bool(pending)

    def permit(self, now: float) -> Permission:
        """What to do with a command that passed the filter, at monotonic time ``now`` (seconds)."""
        self.last_command_at = now
        if self.estopped:
            permission = Permission.ESTOP
        elif not self.armed:
            permission = Permission.DRY_RUN
        elif self.verifying and self.config.hold_while_verifying:
            permission = Permission.VERIFYING
        else:
            if self.watchdog_holding:
                self.reason = "armed"
                self.at_rest = None
            self.watchdog_holding = False
            return Permission.MOVE
        self.holds[permission.value] += 1
        return permission

    def watchdog_due(self, now: float) -> bool:
        """True once when an armed arm has had no command for ``watchdog_s``: stop it now (counted)."""
        if not self.armed or self.watchdog_holding or self.last_command_at is None:
            return False
        if now - self.last_command_at < self.config.watchdog_s:
            return False
        self.watchdog_holding = True
        self.counts.count(WATCHDOG)
        self.reason = f"armed, holding: no command for {now - self.last_command_at:.3f} s"
        self.stop_report, self.at_rest = "", False
        return True

    # ------------------------------------------------------------------ reporting
    def new_episode(self) -> None:
        """Counts start again for a new episode (the lifetime total keeps the earlier ones)."""
        self._past_interventions += self.counts.interventions
        self.counts.reset()

    @property
    def interventions_total(self) -> int:
        """Every intervention since the driver started."""
        return self._past_interventions + self.counts.interventions

    @property
    def detail(self) -> str:
        """One line: the state's reason, how the last stop went, and whether the arm is at rest yet."""
        parts = [self.reason]
        if self.stop_report:
            parts.append(self.stop_report)
        if self.at_rest is not None:
            parts.append("the arm is at rest" if self.at_rest else "the arm is stopping")
        return "; ".join(parts)

    @property
    def level(self) -> int:
        return ERROR if self.estopped or self.recovery_required is not None else OK if self.armed else WARN

    def values(self) -> dict[str, str]:
        """The key/values of ``robot/safety_state``: ``armed``, ``estop``, ``interventions``, ``detail`` and more."""
        return {"armed": str(self.armed).lower(), "estop": str(self.estopped).lower(),
                "interventions": str(self.interventions_total), "detail": self.detail,
                "episode_interventions": str(self.counts.interventions),
                "holding": str(self.watchdog_holding).lower(), "verifying": str(self.verifying).lower(),
                "hold_while_verifying": str(self.config.hold_while_verifying).lower(),
                "dry_run_commands": str(self.holds[Permission.DRY_RUN.value]),
                "recovery_required": self.recovery_required or "", "not_ready": self.not_ready or "",
                "stop": self.stop_report,
                "arm_at_rest": "" if self.at_rest is None else str(self.at_rest).lower()}

    def summary(self) -> dict[str, Any]:
        """The filter's episode summary plus the commands held and why."""
        return {**self.counts.summary(), "held": dict(self.holds), "armed": self.armed, "estop": self.estopped}
