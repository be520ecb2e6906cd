"""The loop's parameters per embodiment, exactly as the LADDER paper gives them.

Every number cites its place in the LADDER paper: Appendix B for triggers, verifier timing and the
privileged verifier; Appendix A for control rates; Section 3 and Appendix D for step budgets;
Section 5 ('Experimental setup') for the periodic interval.

Two rules are readings where the paper leaves room (docs/decisions.md gives the evidence); each is a
*preset option* with the default the paper's words support and the alternative kept selectable
(:func:`get_preset` with ``options``, ``sim-eval --preset-option``, the orchestrator node's
``preset_options``):

``after_last_subgoal``  what the proprioceptive trigger does when an attempt ends on the last
                        subgoal: ``stay`` on it (WidowX), ``restart`` the plan (Franka, Appendix B)
                        or ``end`` the episode.
``set_aside_exempt``    which tasks the privileged verifier never sets a subgoal aside on:
                        ``ordered`` (the paper's words) or ``order_constrained`` (ordered, relay and
                        revisit).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Mapping

from ladder_ros.core.errors import ConfigError, unknown_name
from ladder_ros.core.safety import ActionLimits, GripperDomain
from ladder_ros.core.task import Task, TaskCategory

# After an attempt ends on the last subgoal, the proprioceptive trigger ...
STAY = "stay"  # ... stays on it until the budget ends, as the periodic trigger does (Appendix B)
RESTART = "restart"  # ... starts the plan over from its first subgoal (RoboLab-Long, Appendix B)
END = "end"  # ... ends the episode (finish reason plan_exhausted)
AFTER_LAST_SUBGOAL = (STAY, RESTART, END)

# The privileged verifier never sets a subgoal aside on ...
ORDERED_ONLY = "ordered"  # ... ordered tasks (Appendix B: 'except on ordered tasks')
ORDER_CONSTRAINED = "order_constrained"  # ... ordered, relay and revisit tasks
SET_ASIDE_EXEMPT = (ORDERED_ONLY, ORDER_CONSTRAINED)

# The preset fields a user may choose (readings of the paper), with their valid values.
PRESET_OPTIONS: dict[str, tuple[str, ...]] = {
    "after_last_subgoal": AFTER_LAST_SUBGOAL,
    "set_aside_exempt": SET_ASIDE_EXEMPT,
}


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
    to steps (RoboLab-Long, 1 to 10 subgoals). A horizon the table does not list is an error that
    names the horizons it covers: the paper gives no rule beyond them, so a longer task states its
    own budget (``budget_steps`` of the task in its suite file).
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
        horizons = [horizon for horizon, _ in self.table]
        if len(set(horizons)) != len(horizons):
            raise ConfigError(f"a budget table lists each horizon once, got horizons {horizons}")

    def steps_for(self, horizon: int) -> int:
        _positive_int("horizon", horizon)
        if self.per_subgoal is not None:
            return self.per_subgoal * horizon
        known = dict(self.table)
        if horizon in known:
            return known[horizon]
        raise ConfigError(f"no step budget for horizon {horizon}; the table covers horizons {sorted(known)} "
                          "(give the task its own budget_steps in the suite file)")


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
    after_last_subgoal: str
    move_incomplete_duplicates_to_end: bool
    budget: StepBudget = field(default_factory=lambda: StepBudget(per_subgoal=100))
    action_limits: ActionLimits | None = None  # the safety filter's bounds per control step (core/safety.py)
    set_aside_exempt: str = ORDERED_ONLY

    def __post_init__(self) -> None:
        if not (self.control_rate_hz > 0) or math.isinf(self.control_rate_hz):
            raise ConfigError(f"control_rate_hz must be positive, got {self.control_rate_hz!r}")
        if self.action_limits is not None and not isinstance(self.action_limits, ActionLimits):
            raise ConfigError(f"action_limits must be ActionLimits, got {type(self.action_limits).__name__}")
        _positive_int("periodic_interval_steps", self.periodic_interval_steps)
        _positive_int("privileged_settle_steps", self.privileged_settle_steps)
        if self.privileged_set_aside_steps is not None:
            _positive_int("privileged_set_aside_steps", self.privileged_set_aside_steps)
        for option, valid in PRESET_OPTIONS.items():
            if getattr(self, option) not in valid:
                raise unknown_name(f"value of preset option {option}", str(getattr(self, option)), valid)

    def budget_for(self, task: Task) -> int:
        """The task's step budget: its own ``budget_steps`` (stock SimplerEnv envs), else this preset's."""
        return task.budget_steps if task.budget_steps is not None else self.budget.steps_for(task.horizon)

    def set_aside_allowed(self, category: TaskCategory | None) -> bool:
        """Whether the privileged verifier may set a subgoal of a ``category`` task aside at all."""
        if self.privileged_set_aside_steps is None:
            return False
        if category is None:
            return True
        if self.set_aside_exempt == ORDERED_ONLY:
            return category is not TaskCategory.ORDERED
        return not category.is_order_constrained

    @property
    def options(self) -> dict[str, str]:
        """The preset options in force (recorded with every result)."""
        return {option: getattr(self, option) for option in PRESET_OPTIONS}

    def with_options(self, options: Mapping[str, str]) -> "EmbodimentPreset":
        """This preset with some options changed; an unknown option or value lists the valid ones."""
        for option, value in options.items():
            if option not in PRESET_OPTIONS:
                raise unknown_name("preset option", str(option), list(PRESET_OPTIONS))
            if value not in PRESET_OPTIONS[option]:
                raise unknown_name(f"value of preset option {option}", str(value), PRESET_OPTIONS[option])
        return replace(self, **dict(options)) if options else self

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
    # Appendix B: the periodic trigger 'stays on the last subgoal', and nothing is said of a
    # restart on the WidowX suites; the proprioceptive trigger stays too (docs/decisions.md).
    after_last_subgoal=STAY,
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
    after_last_subgoal=WIDOWX.after_last_subgoal,
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
    after_last_subgoal=RESTART,  # Appendix B: 'the plan restarts from its first subgoal after the last'
    move_incomplete_duplicates_to_end=True,  # Appendix B: interchangeable duplicates move to the end
    budget=StepBudget(table=((1, 900), (2, 1350), (3, 2700), (4, 2700), (5, 2700), (6, 2700),
                             (7, 3600), (8, 4050), (9, 4500), (10, 4950))),  # Appendix D
    action_limits=FRANKA_ACTION_LIMITS,
    set_aside_exempt=ORDERED_ONLY,  # Appendix B: set aside 'except on ordered tasks'
)

PRESETS: dict[str, EmbodimentPreset] = {p.name: p for p in (WIDOWX, WIDOWX_ROBOTARENA, FRANKA)}


def get_preset(name: str, options: Mapping[str, str] | None = None) -> EmbodimentPreset:
    """The preset called ``name`` with ``options`` changed; an unknown name lists the valid ones."""
    try:
        preset = PRESETS[name]
    except KeyError:
        raise unknown_name("preset", name, list(PRESETS)) from None
    return preset.with_options(options or {})


def parse_preset_options(items: "list[str] | tuple[str, ...]") -> dict[str, str]:
    """``["after_last_subgoal=end", ...]`` (CLI flags, ROS parameters) as a mapping, checked."""
    options: dict[str, str] = {}
    for item in items:
        option, sep, value = str(item).partition("=")
        option, value = option.strip(), value.strip()
        if not sep or not option or not value:
            raise ConfigError(f"a preset option is NAME=VALUE, got {item!r}; options: "
                              + "; ".join(f"{k}={'|'.join(v)}" for k, v in PRESET_OPTIONS.items()))
        if option in options and options[option] != value:
            raise ConfigError(f"preset option {option} given twice: {options[option]!r} and {value!r}")
        options[option] = value
    WIDOWX.with_options(options)  # validates names and values
    return options
