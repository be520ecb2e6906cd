"""Low-level policy configs: one YAML per policy under ``policies/``, validated on load.

A config says everything the graph must know to feed a model and to use what it returns: where the
model is (an openpi server's address or a local checkpoint), which cameras it sees and how their
images are resized, the state vector it reads and its units, the actions it returns (layout, units,
bounds, rotation and gripper conventions), its normalisation statistics, its chunk length and
execution horizon, and its control rate. The format (``schema_version: 1``)::

    schema_version: 1
    name: bridge_pi0_server
    description: one line
    embodiment: widowx              # preset name (ladder_ros/core/presets.py); rates must agree
    backend: openpi                 # openpi | transformers | scripted_expert
    server: {host: 127.0.0.1, port: 8000}               # openpi only
    model: {path: /models/pi0_bridge, device: auto}     # transformers only
    cameras:
      - {name: primary, topic: camera/image_raw, key: observation/image, height: 224, width: 224,
         resize: resize_with_pad}
    state:                          # concatenated in this order per request key
      - {key: observation/state, source: ee_position, unit: m}
      - {key: observation/state, source: ee_euler, reference: top_down, angles: sxyz, unit: rad}
      - {key: observation/state, source: zeros, size: 1}     # a pad the training data had
      - {key: observation/state, source: gripper_open}
    prompt_key: prompt
    action:
      key: actions
      kind: ee_delta                # ee_delta (7-D: 3 m, 3 rad, gripper) | joint_position
      rotation: sxyz_axis_angle     # euler_xyz | sxyz_axis_angle | axis_angle (ee_delta only)
      gripper: open_fraction        # open_fraction | signed (ee_delta only)
      axes: [{name: ee_dx, unit: m, low: -0.1, high: 0.1}, ...]
    chunk: {length: 5, execute: 4}
    control_rate_hz: 5
    max_observation_age_s: 0.5
    normalization: none             # none | processor (a local checkpoint's own statistics) |
                                    # {mode: mean_std | quantile, state: {...}, action: {...}}
    statistics: {mode: mean_std, state: {...}, action: {...}}  # optional: the training data's statistics
                                    # when a server normalises (the out-of-distribution guard reads them)
    ood_sigmas: 4.0                 # report state/actions farther than this many standard deviations out
    seam: {max_translation_m: 0.05, max_rotation_rad: 0.5}   # ee_delta; {max_joint_rad: ...} for joints
    execution:                      # on the wall clock only (lockstep always runs the paper's rule)
      mode: realtime                # realtime (default) | synchronous
      blend_steps: 2                # realtime: commands over which a new chunk's first target is blended in
      guidance: true                # realtime: RTC guidance where the backend samples itself (local models)

``execution`` may also be given as the mode alone (``execution: synchronous``).

Every error names the file and the field (``policies/x.yaml: action.axes[2].low: ...``). No rclpy
and no torch here: the config is read by the node, the reference loop and the CLI alike.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from ladder_ros.core.errors import ConfigError, read_yaml
from ladder_ros.core.presets import PRESETS
from ladder_ros.policies.state import ANGLE_CONVENTIONS, REFERENCES

POLICY_SCHEMA_VERSION = 1

OPENPI, TRANSFORMERS, SCRIPTED_EXPERT = "openpi", "transformers", "scripted_expert"
BACKENDS = (OPENPI, TRANSFORMERS, SCRIPTED_EXPERT)

# Rotation conventions of an end-effector delta policy's three rotation numbers. euler_xyz: intrinsic
# XYZ Euler angles, as ManiSkill3's controller reads them and as the graph's policy/action carries
# them; sxyz_axis_angle: roll, pitch, yaw turned into an axis-angle with transforms3d's static 'sxyz'
# convention, as SimplerEnv's Bridge policy wrappers do; axis_angle: a rotation vector.
ROTATION_CONVENTIONS = ("euler_xyz", "sxyz_axis_angle", "axis_angle")
GRIPPER_CONVENTIONS = ("open_fraction", "signed")
EE_DELTA, JOINT_POSITION = "ee_delta", "joint_position"
ACTION_KINDS = (EE_DELTA, JOINT_POSITION)
EE_DELTA_DIM = 7  # dx, dy, dz (m), three rotation numbers (rad), gripper

# Where each state entry comes from, and its size (None: given by the entry's `size`).
STATE_SOURCES: dict[str, int | None] = {
    "joint_positions": None,  # the arm joints of joint_states, in their order (rad or m)
    "ee_position": 3,  # end-effector position in the base frame (m)
    "ee_euler": 3,  # end-effector orientation (rad): its `reference` and `angles` say how (policies/state.py)
    "gripper_open": 1,  # normalised aperture: 1 open, 0 closed
    "gripper_closed": 1,  # 1 - aperture: 0 open, 1 closed (DROID's gripper_position)
    "zeros": None,  # a pad of `size` zeros (several Bridge clients send xyz, rpy, 0, gripper)
}
# resize_with_pad: keep the aspect ratio, pad with black to the target (openpi's client-side
# resize, tf.image.resize_with_pad); resize: stretch to the target; none: the camera's own size.
RESIZE_RULES = ("resize_with_pad", "resize", "none")
NORMALIZATION_MODES = ("mean_std", "quantile")
# normalization: processor -- the statistics saved with a local checkpoint's processor (transformers'
# PI0Processor keeps state_mean/state_std and actions_mean/actions_std).
PROCESSOR_STATISTICS = "processor"
DEVICES = ("auto", "cpu", "cuda")
# How chunks run on the wall clock (policies/executor.py). synchronous: the paper's rule (Appendix A): the first
# k of each chunk in order, a chunk of deltas requested once the queue is empty (absolute targets look ahead
# within the execution window); realtime: requests overlap execution and each chunk takes over where its
# observation's time has come, the actions whose time has passed dropped by count.
SYNCHRONOUS, REALTIME = "synchronous", "realtime"
EXECUTION_MODES = (SYNCHRONOUS, REALTIME)
DTYPES = ("auto", "float32", "bfloat16", "float16")


@dataclass(frozen=True)
class ExecutionSettings:
    """How the wall-clock executor runs chunks (``EXECUTION_MODES``); see :mod:`ladder_ros.policies.executor`.

    ``blend_steps``: in realtime mode, where a new chunk's first target differs from the one it replaces, the
    next ``blend_steps`` commands move from the old plan to the new one in equal parts (0: it takes over at
    once); project choice 2 (0.4 s at 5 Hz). ``guidance``: in realtime mode, a backend that runs its own
    flow-matching sampler is guided to continue the actions that run while it computes (RTC, arXiv 2506.07339).
    """

    mode: str = REALTIME
    blend_steps: int = 2
    guidance: bool = True

    @property
    def realtime(self) -> bool:
        return self.mode == REALTIME


@dataclass(frozen=True)
class ServerSettings:
    """An openpi policy server (``scripts/serve_policy.py``): websocket on ``host:port``, /healthz beside it."""

    host: str = "127.0.0.1"
    port: int = 8000  # openpi's serve_policy.py default
    api_key_env: str = ""  # environment variable with an API key (sent as 'Authorization: Api-Key ...')
    connect_timeout_s: float = 5.0
    request_timeout_s: float = 5.0
    backoff_initial_s: float = 0.5
    backoff_max_s: float = 8.0
    max_message_mb: float = 64.0
    # After this many error replies in a row (a traceback instead of actions) the episode ends with the
    # server's error as the reason; 0: never (project choice: with the default back-off, 5 errors span ~7.5 s).
    max_consecutive_errors: int = 5

    @property
    def uri(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"ws://{host}:{self.port}"


@dataclass(frozen=True)
class ModelSettings:
    """A local transformers checkpoint. ``auto`` device: the GPU when there is one."""

    path: str
    device: str = "auto"
    dtype: str = "auto"  # auto: bfloat16 on a GPU that supports it, else float16 there; float32 on the CPU
    num_inference_steps: int | None = None  # flow-matching steps; None: the model's own default
    threads: int = 0  # CPU threads for torch; 0: torch's default


@dataclass(frozen=True)
class CameraSpec:
    """One camera the policy sees: its topic, the request key, and the size its images are sent at."""

    name: str
    topic: str
    key: str
    height: int
    width: int
    resize: str = "resize_with_pad"


@dataclass(frozen=True)
class StateEntry:
    """One part of the state vector: where it comes from (``STATE_SOURCES``), its size and unit.

    An ``ee_euler`` entry also says what its angles mean: ``reference`` (``top_down`` or ``base``) and
    ``angles`` (``sxyz`` or ``euler_xyz``), see :mod:`ladder_ros.policies.state`.
    """

    key: str
    source: str
    size: int
    unit: str = ""
    reference: str | None = None
    angles: str | None = None


@dataclass(frozen=True)
class ActionAxis:
    """One number of an action: its name, unit and the bounds a model's output must keep (model units)."""

    name: str
    unit: str
    low: float
    high: float


@dataclass(frozen=True)
class ActionSpec:
    """What a policy returns: the reply key, the kind, the axes and (ee_delta) its conventions."""

    key: str
    kind: str
    axes: tuple[ActionAxis, ...]
    rotation: str | None = None
    gripper: str | None = None

    @property
    def dim(self) -> int:
        return len(self.axes)

    @property
    def low(self) -> np.ndarray:
        return np.array([a.low for a in self.axes])

    @property
    def high(self) -> np.ndarray:
        return np.array([a.high for a in self.axes])

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(a.name for a in self.axes)

    @property
    def relative(self) -> bool:
        """Each action moves the arm's target from where the previous command left it (Bridge's deltas):
        a chunk computed before queued commands are carried out would add its motion to theirs."""
        return self.kind == EE_DELTA


@dataclass(frozen=True)
class Statistics:
    """Per-dimension statistics: mean/std (mean_std) or q01/q99 (quantile)."""

    first: tuple[float, ...]  # mean or q01
    second: tuple[float, ...]  # std or q99


# A normal distribution's 1st and 99th percentiles lie 2.326 standard deviations from its mean, so a
# quantile-normalised value of +-1 (q01, q99) is read as 2.326 standard deviations by the guard.
QUANTILE_SIGMAS = 2.326


@dataclass(frozen=True)
class Normalization:
    """How model inputs and outputs are scaled. mean_std: (x - mean) / std. quantile: q01..q99 to [-1, 1]
    (openpi's π0.5 convention)."""

    mode: str
    state: Statistics
    action: Statistics

    def normalize_state(self, state: np.ndarray) -> np.ndarray:
        return _forward(self.mode, self.state, state)

    def unnormalize_action(self, action: np.ndarray) -> np.ndarray:
        return _inverse(self.mode, self.action, action)

    def sigmas(self, part: str, values: np.ndarray) -> np.ndarray:
        """How many standard deviations each value of ``part`` (state or action) lies from the data's mean
        (quantile statistics: read through :data:`QUANTILE_SIGMAS`)."""
        normalised = _forward(self.mode, self.state if part == "state" else self.action, values)
        return np.abs(normalised) * (1.0 if self.mode == "mean_std" else QUANTILE_SIGMAS)


@dataclass(frozen=True)
class SeamBounds:
    """The largest jump allowed where a new chunk takes over (None: measured, not refused).

    ee_delta: the change of the commanded step between the last action given and the new chunk's first
    (translation m, the largest change on any axis, as the safety filter bounds each axis; rotation rad,
    the angle between the two rotation steps); joint_position: the first target's distance from the last target given,
    or from the measured joints when none was (rad, arm joints only).
    """

    max_translation_m: float | None = None
    max_rotation_rad: float | None = None
    max_joint_rad: float | None = None


def _forward(mode: str, stats: Statistics, x: np.ndarray) -> np.ndarray:
    a, b = np.asarray(stats.first), np.asarray(stats.second)
    if mode == "mean_std":
        return (x - a) / b
    return (x - a) / (b - a) * 2.0 - 1.0


def _inverse(mode: str, stats: Statistics, y: np.ndarray) -> np.ndarray:
    a, b = np.asarray(stats.first), np.asarray(stats.second)
    if mode == "mean_std":
        return y * b + a
    return (y + 1.0) / 2.0 * (b - a) + a


@dataclass(frozen=True)
class PolicyConfig:
    """A validated policy config (see the module docstring for the file format)."""

    name: str
    source: str
    backend: str
    embodiment: str
    control_rate_hz: float
    chunk_length: int
    execute_steps: int
    action: ActionSpec
    cameras: tuple[CameraSpec, ...] = ()
    state: tuple[StateEntry, ...] = ()
    prompt_key: str = "prompt"
    max_observation_age_s: float = 0.5
    server: ServerSettings | None = None
    model: ModelSettings | None = None
    normalization: Normalization | None = None
    statistics_from_processor: bool = False  # a local model's statistics come with its processor
    statistics: Normalization | None = None  # the training data's statistics when the server normalises
    ood_sigmas: float = 4.0
    seam: SeamBounds = field(default_factory=SeamBounds)
    execution: ExecutionSettings = field(default_factory=ExecutionSettings)
    simulation_only: bool = False
    description: str = ""
    raw: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @property
    def period_s(self) -> float:
        return 1.0 / self.control_rate_hz

    @property
    def state_dim(self) -> int:
        return sum(e.size for e in self.state)

    @property
    def reads_images(self) -> bool:
        return bool(self.cameras)

    def digest(self) -> str:
        """A short hash of the config as it runs (the file's fields, with a rotation convention that
        replaced the file's): two records with the same digest ran the same policy config."""
        effective = {"file": self.raw, "action_rotation": self.action.rotation}
        if self.execution.mode != _file_execution_mode(self.raw):
            effective["execution_mode"] = self.execution.mode  # a mode chosen at run time runs another config
        # json calls default for what it cannot write itself: here only a section a caller gave as another mapping
        # type (the parser lets nothing else through), written as the dict it holds, so it hashes as that dict.
        text = json.dumps(effective, sort_keys=True, default=dict, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()[:16]


# ---------------------------------------------------------------------------------------- parsing
class _Reader:
    """Typed access to one mapping of the file; every error names the file and the dotted key."""

    def __init__(self, data: Any, source: str, where: str = ""):
        self.source, self.where = source, where
        if not isinstance(data, Mapping):
            raise ConfigError(f"expected a mapping, got {type(data).__name__}", source=source, key=where or None)
        self.data = data
        self._used: set[str] = set()

    def key(self, name: str) -> str:
        return f"{self.where}.{name}" if self.where else name

    def fail(self, name: str, message: str) -> ConfigError:
        return ConfigError(message, source=self.source, key=self.key(name))

    def has(self, name: str) -> bool:
        return name in self.data

    def raw(self, name: str, default: Any = ...) -> Any:
        self._used.add(name)
        if name not in self.data:
            if default is ...:
                raise self.fail(name, "missing required field")
            return default
        return self.data[name]

    def string(self, name: str, default: Any = ..., *, choices: tuple[str, ...] = (), empty: bool = False) -> Any:
        value = self.raw(name, default)
        if not isinstance(value, str) or (not empty and not value.strip()):
            raise self.fail(name, f"must be a{'' if empty else ' non-empty'} string, got {value!r}")
        if choices and value not in choices:
            raise self.fail(name, f"must be one of {', '.join(choices)}, got {value!r}")
        return value

    def integer(self, name: str, default: Any = ..., *, low: int | None = None, high: int | None = None) -> Any:
        value = self.raw(name, default)
        if value is None and default is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.fail(name, f"must be an integer, got {value!r}")
        if low is not None and value < low:
            raise self.fail(name, f"must be >= {low}, got {value}")
        if high is not None and value > high:
            raise self.fail(name, f"must be <= {high}, got {value}")
        return value

    def number(self, name: str, default: Any = ..., *, positive: bool = False) -> Any:
        value = self.raw(name, default)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise self.fail(name, f"must be a finite number, got {value!r}")
        if positive and value <= 0:
            raise self.fail(name, f"must be positive, got {value}")
        return float(value)

    def boolean(self, name: str, default: Any = ...) -> bool:
        value = self.raw(name, default)
        if not isinstance(value, bool):
            raise self.fail(name, f"must be true or false, got {value!r}")
        return value

    def child(self, name: str) -> "_Reader":
        return _Reader(self.raw(name), self.source, self.key(name))

    def items(self, name: str) -> list["_Reader"]:
        value = self.raw(name)
        if not isinstance(value, list):
            raise self.fail(name, f"must be a list, got {type(value).__name__}")
        return [_Reader(v, self.source, f"{self.key(name)}[{i}]") for i, v in enumerate(value)]

    def numbers(self, name: str, length: int) -> tuple[float, ...]:
        value = self.raw(name)
        if not isinstance(value, list) or not all(
                isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in value):
            raise self.fail(name, f"must be a list of finite numbers, got {value!r}")
        if len(value) != length:
            raise self.fail(name, f"must have {length} entries (one per dimension), got {len(value)}")
        return tuple(float(v) for v in value)

    def done(self) -> None:
        """Unknown fields are errors: a misspelt field would otherwise be silently ignored."""
        unknown = sorted(set(self.data) - self._used)
        if unknown:
            raise self.fail(str(unknown[0]), "unknown field")


def _server(r: _Reader) -> ServerSettings:
    s = ServerSettings(
        host=r.string("host", ServerSettings.host), port=r.integer("port", ServerSettings.port, low=1, high=65535),
        api_key_env=r.string("api_key_env", "", empty=True),
        connect_timeout_s=r.number("connect_timeout_s", ServerSettings.connect_timeout_s, positive=True),
        request_timeout_s=r.number("request_timeout_s", ServerSettings.request_timeout_s, positive=True),
        backoff_initial_s=r.number("backoff_initial_s", ServerSettings.backoff_initial_s, positive=True),
        backoff_max_s=r.number("backoff_max_s", ServerSettings.backoff_max_s, positive=True),
        max_message_mb=r.number("max_message_mb", ServerSettings.max_message_mb, positive=True),
        max_consecutive_errors=r.integer("max_consecutive_errors", ServerSettings.max_consecutive_errors, low=0,
                                         high=1000))
    if s.backoff_max_s < s.backoff_initial_s:
        raise r.fail("backoff_max_s", f"must be >= backoff_initial_s ({s.backoff_initial_s}), got {s.backoff_max_s}")
    r.done()
    return s


def _model(r: _Reader, base: Path) -> ModelSettings:
    path = r.string("path")
    if not Path(path).is_absolute() and not path.startswith("~"):
        path = str((base / path).resolve())  # relative to the config file
    m = ModelSettings(path=str(Path(path).expanduser()), device=r.string("device", "auto", choices=DEVICES),
                      dtype=r.string("dtype", "auto", choices=DTYPES),
                      num_inference_steps=r.integer("num_inference_steps", None, low=1, high=1000),
                      threads=r.integer("threads", 0, low=0, high=1024))
    r.done()
    return m


def _camera(r: _Reader) -> CameraSpec:
    c = CameraSpec(name=r.string("name"), topic=r.string("topic", "camera/image_raw"), key=r.string("key"),
                   height=r.integer("height", low=8, high=4096), width=r.integer("width", low=8, high=4096),
                   resize=r.string("resize", "resize_with_pad", choices=RESIZE_RULES))
    r.done()
    return c


def _state_entry(r: _Reader) -> StateEntry:
    source = r.string("source", choices=tuple(STATE_SOURCES))
    fixed = STATE_SOURCES[source]
    if fixed is None:
        size = r.integer("size", low=1, high=64)
    else:
        size = r.integer("size", fixed)
        if size != fixed:
            raise r.fail("size", f"{source} has {fixed} entries, got {size}")
    reference = angles = None
    if source == "ee_euler":
        # No default: the same pose reads as very different numbers (docs/conventions.md), so the config
        # must say which the policy was trained on.
        reference = r.string("reference", choices=REFERENCES)
        angles = r.string("angles", choices=ANGLE_CONVENTIONS)
    entry = StateEntry(key=r.string("key"), source=source, size=size, unit=r.string("unit", "", empty=True),
                       reference=reference, angles=angles)
    r.done()
    return entry


def _axis(r: _Reader) -> ActionAxis:
    axis = ActionAxis(name=r.string("name"), unit=r.string("unit"), low=r.number("low"), high=r.number("high"))
    if not axis.low < axis.high:
        raise r.fail("high", f"must be greater than low ({axis.low}), got {axis.high}")
    r.done()
    return axis


def _action(r: _Reader) -> ActionSpec:
    kind = r.string("kind", choices=ACTION_KINDS)
    axes_readers = r.items("axes")
    axes = tuple(_axis(a) for a in axes_readers)
    if not axes:
        raise r.fail("axes", "needs at least one axis")
    names = [a.name for a in axes]
    duplicate = next((n for n in names if names.count(n) > 1), None)
    if duplicate:
        raise r.fail("axes", f"axis names must be unique, {duplicate!r} appears twice")
    rotation = gripper = None
    if kind == EE_DELTA:
        if len(axes) != EE_DELTA_DIM:
            raise r.fail("axes", f"an ee_delta action has {EE_DELTA_DIM} axes (dx, dy, dz in m, three rotation "
                                 f"numbers in rad, gripper), got {len(axes)}")
        rotation = r.string("rotation", choices=ROTATION_CONVENTIONS)
        gripper = r.string("gripper", choices=GRIPPER_CONVENTIONS)
    else:
        for name in ("rotation", "gripper"):
            if r.has(name):
                raise r.fail(name, f"only ee_delta actions have a {name} convention")
    spec = ActionSpec(key=r.string("key", "actions"), kind=kind, axes=axes, rotation=rotation, gripper=gripper)
    r.done()
    return spec


def _statistics(r: _Reader, mode: str, length: int) -> Statistics:
    first, second = ("mean", "std") if mode == "mean_std" else ("q01", "q99")
    stats = Statistics(first=r.numbers(first, length), second=r.numbers(second, length))
    for i, (a, b) in enumerate(zip(stats.first, stats.second)):
        if mode == "mean_std" and b <= 0:
            raise r.fail(second, f"entry {i} must be positive, got {b}")
        if mode == "quantile" and b <= a:
            raise r.fail(second, f"entry {i} must be greater than {first} ({a}), got {b}")
    r.done()
    return stats


def _normalization(r: _Reader, state_dim: int, action_dim: int) -> Normalization:
    mode = r.string("mode", choices=NORMALIZATION_MODES)
    n = Normalization(mode=mode, state=_statistics(r.child("state"), mode, state_dim),
                      action=_statistics(r.child("action"), mode, action_dim))
    r.done()
    return n


def _file_execution_mode(raw: Mapping[str, Any]) -> str:
    """The execution mode a config file gives (the default when it gives none)."""
    value = raw.get("execution", REALTIME)
    return value.get("mode", REALTIME) if isinstance(value, Mapping) else value


def _execution(r: _Reader) -> ExecutionSettings:
    value = r.raw("execution", None)
    if value is None and not r.has("execution"):
        return ExecutionSettings()
    if isinstance(value, str):
        r.string("execution", choices=EXECUTION_MODES)
        return ExecutionSettings(mode=value)
    e = r.child("execution")
    settings = ExecutionSettings(mode=e.string("mode", REALTIME, choices=EXECUTION_MODES),
                                 blend_steps=e.integer("blend_steps", ExecutionSettings.blend_steps, low=0, high=100),
                                 guidance=e.boolean("guidance", ExecutionSettings.guidance))
    e.done()
    return settings


def with_execution(config: PolicyConfig, mode: str | None) -> PolicyConfig:
    """``config`` with its execution mode replaced by the user's choice (None or "": its own)."""
    if not mode:
        return config
    if mode not in EXECUTION_MODES:
        raise ConfigError(f"execution mode must be one of {', '.join(EXECUTION_MODES)}, got {mode!r}",
                          source=config.source, key="execution.mode")
    return replace(config, execution=replace(config.execution, mode=mode))


def _seam(r: _Reader, kind: str) -> SeamBounds:
    allowed = ("max_translation_m", "max_rotation_rad") if kind == EE_DELTA else ("max_joint_rad",)
    for name in r.data:
        if name not in allowed:
            raise r.fail(str(name), f"a {kind} policy's seam bounds are {', '.join(allowed)}")
    seam = SeamBounds(**{name: r.number(name, positive=True) for name in allowed if r.has(name)})
    r.done()
    return seam


def parse_policy_config(data: Any, source: str = "<policy>", base: Path | None = None) -> PolicyConfig:
    """Validate a policy config mapping; ``base`` is the folder relative model paths start from."""
    r = _Reader(data, source)
    version = r.raw("schema_version")
    if version != POLICY_SCHEMA_VERSION:
        raise r.fail("schema_version", f"unsupported {version!r}; this version reads {POLICY_SCHEMA_VERSION}")
    name = r.string("name")
    backend = r.string("backend", choices=BACKENDS)
    embodiment = r.string("embodiment", choices=tuple(sorted(PRESETS)))
    rate = r.number("control_rate_hz", positive=True)
    preset_rate = PRESETS[embodiment].control_rate_hz
    if not math.isclose(rate, preset_rate):
        raise r.fail("control_rate_hz", f"the {embodiment} preset runs at {preset_rate:g} Hz (paper Appendix A), "
                                        f"got {rate:g}")
    chunk = r.child("chunk")
    length = chunk.integer("length", low=1, high=1000)
    execute = chunk.integer("execute", low=1, high=length)
    chunk.done()
    simulation_only = r.boolean("simulation_only", backend == SCRIPTED_EXPERT)
    if backend == SCRIPTED_EXPERT and not simulation_only:
        raise r.fail("simulation_only", "the scripted expert reads the simulator's privileged state: it must be "
                                        "simulation_only: true")
    cameras = tuple(_camera(c) for c in r.items("cameras")) if r.has("cameras") else ()
    state = tuple(_state_entry(s) for s in r.items("state")) if r.has("state") else ()
    for field_name, values in (("cameras", [c.name for c in cameras]), ("cameras", [c.key for c in cameras])):
        duplicate = next((v for v in values if values.count(v) > 1), None)
        if duplicate:
            raise r.fail(field_name, f"camera names and keys must be unique, {duplicate!r} appears twice")
    action = _action(r.child("action"))
    server = model = normalization = None
    if backend == OPENPI:
        server = _server(r.child("server")) if r.has("server") else ServerSettings()
    elif r.has("server"):
        raise r.fail("server", f"only the openpi backend talks to a server (backend is {backend})")
    if backend == TRANSFORMERS:
        model = _model(r.child("model"), base or Path(source).resolve().parent)
        if not cameras:
            raise r.fail("cameras", "a transformers policy needs at least one camera")
    elif r.has("model"):
        raise r.fail("model", f"only the transformers backend loads a local model (backend is {backend})")
    if backend != SCRIPTED_EXPERT and not (cameras or state):
        raise r.fail("state", "a learned policy needs cameras or state entries to read")
    norm = r.raw("normalization", "none")
    if norm not in ("none", PROCESSOR_STATISTICS) and not isinstance(norm, Mapping):
        raise r.fail("normalization", f"must be none, {PROCESSOR_STATISTICS} or a mapping (mode, state, action), "
                                      f"got {norm!r}")
    if norm != "none" and backend != TRANSFORMERS:
        raise r.fail("normalization", "only a local model is normalised here (a server normalises itself): "
                                      "use normalization: none")
    state_dim = sum(s.size for s in state)
    if isinstance(norm, Mapping):
        normalization = _normalization(r.child("normalization"), state_dim, len(action.axes))
    statistics = _normalization(r.child("statistics"), state_dim, len(action.axes)) if r.has("statistics") else None
    if statistics is not None and norm != "none":
        raise r.fail("statistics", "the normalization statistics are the guard's already; give statistics only "
                                   "when the server normalises (normalization: none)")
    seam = _seam(r.child("seam"), action.kind) if r.has("seam") else SeamBounds()
    config = PolicyConfig(
        name=name, source=source, backend=backend, embodiment=embodiment, control_rate_hz=rate,
        chunk_length=length, execute_steps=execute, action=action, cameras=cameras, state=state,
        prompt_key=r.string("prompt_key", "prompt"),
        max_observation_age_s=r.number("max_observation_age_s", 0.5, positive=True),
        server=server, model=model, normalization=normalization,
        statistics_from_processor=norm == PROCESSOR_STATISTICS, statistics=statistics,
        ood_sigmas=r.number("ood_sigmas", 4.0, positive=True), seam=seam, execution=_execution(r),
        simulation_only=simulation_only,
        description=r.string("description", "", empty=True), raw=dict(r.data))
    r.done()
    return config


def load_policy_config(path: str | Path) -> PolicyConfig:
    """Read and validate a policy YAML; errors name the file and the field."""
    path = Path(path)
    return parse_policy_config(read_yaml(path, "policy config"), source=str(path), base=path.resolve().parent)
