"""The loop's parameters per embodiment, exactly as the LADDER paper gives them.

Every number cites its place in the paper (seed 002, LADDER): Appendix B for triggers, verifier
timing and the privileged verifier; Appendix A for control rates; Section 3 and Appendix D for
step budgets; Section 5 ('Experimental setup') for the periodic interval.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from ladder_ros.core.errors import ConfigError, unknown_name
from ladder_ros.core.safety import ActionLimits, GripperDomain


def _positive_int(name: str, value: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise ConfigError(f"{name} must be a positive integer, got {value!r}")


def _non_negative_int(name: str, value: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ConfigError(f"{name} must be a non-negative integer, got {value!r}")


@dataclass(frozen=True)
class GripperTriggerParams:
    """When an attempt ends, read from the normalised gripper aperture (0 closed, 1 open)."""

    open_threshold: float = 0.5  # 'opens past 0.5' (Appendix B)
    min_close_steps: int = 3  # WidowX: 'a close of at least 3 steps' (Appendix B)
    min_lift_m: float | None = None  # Franka: 'a lift of 3 cm' during the close (Appendix B)
    cooldown_steps: int = 8  # WidowX 8, Franka 57 (Appendix B)
    release_timeout_steps: int | None = None  # Franka: 'ends after 300 steps without a release'

    def __post_init__(self) -> None:
        if not (0.0 < self.open_threshold < 1.0) or math.isnan(self.open_threshold):
            raise ConfigError(f"open_threshold must be in (0, 1), got {self.open_threshold!r}")
        _positive_int("min_close_steps", self.min_close_steps)
        _non_negative_int("cooldown_steps", self.cooldown_steps)
        if self.min_lift_m is not None and not (0.0 < self.min_lift_m < 1.0):
            raise ConfigError(f"min_lift_m must be in (0, 1) metres or null, got {self.min_lift_m!r}")
        if self.release_timeout_steps is not None:
            _positive_int("release_timeout_steps", self.release_timeout_steps)


@dataclass(frozen=True)
class VerifierTimingParams:
    """When the proprioceptive verifier sends its count query (Appendix B)."""

    delay_after_release_steps: int = 5  # WidowX 5, Franka 35
    query_without_release_steps: int = 45  # WidowX 45, Franka 300

    def __post_init__(self) -> None:
        _non_negative_int("delay_after_release_steps", self.delay_after_release_steps)
        _positive_int("query_without_release_steps", self.query_without_release_steps)


@dataclass(frozen=True)
class StepBudget:
    """Simulated steps an episode may use, by horizon (Section 3, Appendix D).

    Either ``per_subgoal`` steps for every subgoal (WidowX suites: 100), or a table from horizon
    to steps (RoboLab-Long). Horizons above the table's largest use its largest entry's rule.
    """

    per_subgoal: int | None = None
    table: tuple[tuple[int, int], ...] = ()

    def __post_init__(self) -> None:
        if (self.per_subgoal is None) == (not self.table):
            raise ConfigError("a step budget is either per_subgoal or a table, exactly one")
        if self.per_subgoal is not None:
            _positive_int("per_subgoal", self.per_subgoal)
        for horizon, steps in self.table:
            _positive_int("budget horizon", horizon)
            _positive_int("budget steps", steps)

    def steps_for(self, horizon: int) -> int:
        _positive_int("horizon", horizon)
        if self.per_subgoal is not None:
            return self.per_subgoal * horizon
        known = dict(self.table)
        if horizon in known:
            return known[horizon]
        raise ConfigError(f"no step budget for horizon {horizon}; the table covers {sorted(known)}")


@dataclass(frozen=True)
class EmbodimentPreset:
    """Everything the orchestrator needs to know about one embodiment's loop."""

    name: str
    description: str
    control_rate_hz: float
    periodic_interval_steps: int
    trigger: GripperTriggerParams
    verifier_timing: VerifierTimingParams
    privileged_settle_steps: int
    privileged_set_aside_steps: int | None
    restart_plan_after_last: bool
    move_incomplete_duplicates_to_end: bool
    budget: StepBudget = field(default_factory=lambda: StepBudget(per_subgoal=100))
    action_limits: ActionLimits | None = None  # the safety filter's bounds per control step (core/safety.py)

    def __post_init__(self) -> None:
        if not (self.control_rate_hz > 0) or math.isinf(self.control_rate_hz):
            raise ConfigError(f"control_rate_hz must be positive, got {self.control_rate_hz!r}")
        if self.action_limits is not None and not isinstance(self.action_limits, ActionLimits):
            raise ConfigError(f"action_limits must be ActionLimits, got {type(self.action_limits).__name__}")
        _positive_int("periodic_interval_steps", self.periodic_interval_steps)
        _positive_int("privileged_settle_steps", self.privileged_settle_steps)
        if self.privileged_set_aside_steps is not None:
            _positive_int("privileged_set_aside_steps", self.privileged_set_aside_steps)

    @property
    def release_detector(self) -> GripperTriggerParams:
        """The verifier 'detects attempts in the same way, without the cooldown' (Appendix B)."""
        return GripperTriggerParams(
            open_threshold=self.trigger.open_threshold,
            min_close_steps=self.trigger.min_close_steps,
            min_lift_m=self.trigger.min_lift_m,
            cooldown_steps=0,
            release_timeout_steps=None,
        )


# WidowX, per 5 Hz step: 0.05 m per translation axis, the box the Bridge WidowX environments give a
# one-step end-effector delta (rail-berkeley/bridge_data_robot, widowx_envs/widowx_env.py, the reaching
# envs' action space +-0.05), i.e. 0.25 m/s; pi/2 per rotation axis, the bounds ManiSkill3's Bridge
# controller declares (bridge_dataset_eval/base_env.py, rot_lower/rot_upper of
# arm_pd_ee_target_delta_pose_align2); the gripper binary, as Bridge policies binarise it
# (2 * (open > 0.5) - 1, no sticky gripper; SimplerEnv).
WIDOWX_ACTION_LIMITS = ActionLimits(max_translation_m=0.05, max_rotation_rad=math.pi / 2,
                                    gripper=GripperDomain.BINARY,
                                    source="bridge_data_robot widowx_env (+-0.05 m), ManiSkill3 Bridge controller "
                                           "(+-pi/2 rad), SimplerEnv gripper binarisation")
# Franka, per 15 Hz step: the arm's Cartesian velocity limits (Franka Control Interface docs, "Robot and
# interface specifications": 1.7 m/s translation, 2.5 rad/s rotation) over one control period; the
# gripper a continuous width command in [-1, 1] (pi0.5-DROID predicts a gripper position).
FRANKA_ACTION_LIMITS = ActionLimits(max_translation_m=1.7 / 15.0, max_rotation_rad=2.5 / 15.0,
                                    gripper=GripperDomain.CONTINUOUS,
                                    source="Franka Cartesian limits 1.7 m/s, 2.5 rad/s at 15 Hz")

WIDOWX = EmbodimentPreset(
    name="widowx",
    description="WidowX 250 on SimplerEnv-Long (5 Hz, Bridge policy)",
    control_rate_hz=5.0,  # Appendix A: 5 Hz on SimplerEnv-Long and RobotArena-Long
    periodic_interval_steps=27,  # Section 5 / Appendix B: every 27 steps (5.4 s at 5 Hz)
    trigger=GripperTriggerParams(open_threshold=0.5, min_close_steps=3, min_lift_m=None,
                                 cooldown_steps=8, release_timeout_steps=None),  # Appendix B
    verifier_timing=VerifierTimingParams(delay_after_release_steps=5,
                                         query_without_release_steps=45),  # Appendix B
    privileged_settle_steps=3,  # Appendix B: 3 steps on SimplerEnv-Long
    privileged_set_aside_steps=None,  # Appendix B: on the WidowX suites retried until the budget ends
    restart_plan_after_last=False,  # Appendix B: 'The WidowX suites have no such limit'
    move_incomplete_duplicates_to_end=False,  # Appendix B: retried in place
    budget=StepBudget(per_subgoal=100),  # Section 3: 100 steps (20 s at 5 Hz) per subgoal
    action_limits=WIDOWX_ACTION_LIMITS,
)

WIDOWX_ROBOTARENA = EmbodimentPreset(
    name="widowx_robotarena",
    description="WidowX 250 on RobotArena-Long (as widowx, settle window 10)",
    control_rate_hz=WIDOWX.control_rate_hz,
    periodic_interval_steps=WIDOWX.periodic_interval_steps,
    trigger=WIDOWX.trigger,
    verifier_timing=WIDOWX.verifier_timing,
    privileged_settle_steps=10,  # Appendix B: 10 on RobotArena-Long
    privileged_set_aside_steps=None,
    restart_plan_after_last=False,
    move_incomplete_duplicates_to_end=False,
    budget=WIDOWX.budget,
    action_limits=WIDOWX.action_limits,
)

FRANKA = EmbodimentPreset(
    name="franka",
    description="Franka Panda on RoboLab-Long (15 Hz, pi0.5-DROID)",
    control_rate_hz=15.0,  # Appendix A: 15 Hz on RoboLab-Long
    periodic_interval_steps=250,  # Section 5 / Appendix B: every 250 steps (16.7 s at 15 Hz)
    trigger=GripperTriggerParams(open_threshold=0.5, min_close_steps=21, min_lift_m=0.03,
                                 cooldown_steps=57, release_timeout_steps=300),  # Appendix B
    verifier_timing=VerifierTimingParams(delay_after_release_steps=35,
                                         query_without_release_steps=300),  # Appendix B
    privileged_settle_steps=120,  # Appendix B: 120 on RoboLab-Long (contact chatter on rims)
    privileged_set_aside_steps=600,  # Appendix B: not completed within 600 steps -> set aside
    restart_plan_after_last=True,  # Appendix B: the plan restarts from its first subgoal
    move_incomplete_duplicates_to_end=True,  # Appendix B: interchangeable duplicates move to the end
    budget=StepBudget(table=((1, 900), (2, 1350), (3, 2700), (4, 2700), (5, 2700), (6, 2700),
                             (7, 3600), (8, 4050), (9, 4500), (10, 4950))),  # Appendix D
    action_limits=FRANKA_ACTION_LIMITS,
)

PRESETS: dict[str, EmbodimentPreset] = {p.name: p for p in (WIDOWX, WIDOWX_ROBOTARENA, FRANKA)}


def get_preset(name: str) -> EmbodimentPreset:
    """The preset called ``name``; an unknown name lists the valid ones."""
    try:
        return PRESETS[name]
    except KeyError:
        raise unknown_name("preset", name, list(PRESETS)) from None
