"""The network-safe ROS 2 environment every graph the project starts runs in.

With the PyPI ROS 2 wheels, ``ROS_LOCALHOST_ONLY=1`` is silently ignored; without
``ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST`` Fast DDS announces itself by multicast on every network
the machine has (docs/dependencies.md, "Network safety"). So before any rclpy use, tests, CI, demos, benchmarks and
``ladder-ros up`` set:

* ``ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST`` (ROS 2 Iron and newer) and ``ROS_LOCALHOST_ONLY=1``
  (what ROS 2 Humble reads; newer distributions warn about it and keep the range setting);
* the ``ROS_DOMAIN_ID`` the user exported, or else one that no other ladder_ros process on this
  machine holds (claimed with a lock file, so two test runs side by side never see each other's
  topics);
* ``FASTDDS_DEFAULT_PROFILES_FILE`` (``FASTRTPS_DEFAULT_PROFILES_FILE`` on Humble) pointing at
  ``config/fastdds_localhost.xml`` (transports restricted to shared memory and 127.0.0.1, and a
  shared-memory segment large enough for images);
* ``RMW_IMPLEMENTATION=rmw_fastrtps_cpp``, the middleware that profile is written for;
* in a virtual environment of the ROS 2 wheels, its ``lib`` folder on ``LD_LIBRARY_PATH``: the
  interface packages that have no wheel (``tf2_msgs``, built by ``scripts/setup.sh``) install their
  typesupport libraries there, and ROS loads those by bare name, through the loader's path as it was
  when the process started (what sourcing a ROS workspace's ``setup.bash`` does on a robot). The
  wheels' own start-up hook puts it there too, but only in a process whose environment does not
  already carry its "done" mark from another environment.

This module never imports rclpy: it must run before rclpy loads.
"""

from __future__ import annotations

import fcntl
import os
import re
import sys
import tempfile
from pathlib import Path
from typing import Mapping, MutableMapping

from ladder_ros.core.errors import ConfigError
from ladder_ros.paths import share_path

PROFILE_NAME = "fastdds_localhost.xml"
# Fast DDS maps domain ids to UDP ports; on Linux ids 0-101 leave room for the ephemeral port
# range (ROS 2 docs, "The ROS_DOMAIN_ID"). 0 is everyone's default, so it is never claimed here.
DOMAIN_ID_MIN = 1
DOMAIN_ID_MAX = 101
ROS_DOMAIN_ID_MAX = 232  # the largest id ROS 2 accepts (ROS 2 docs, "The ROS_DOMAIN_ID")
_LOCK_DIR = Path(tempfile.gettempdir()) / "ladder_ros_domains"
_held_locks: dict[int, int] = {}  # domain id -> open lock file descriptor, held for the process's life
_SHM_DIR = "/dev/shm"
_SHM_PORT = re.compile(r"fast(?:rtps|dds)_port(\d+)")  # Fast DDS's shared-memory port segments
_UDP_TABLES = ("/proc/net/udp", "/proc/net/udp6")


def fastdds_profile() -> Path:
    """The project's loopback-only Fast DDS profile (source tree or installed share folder)."""
    return share_path("config", PROFILE_NAME)


def _try_claim(domain_id: int) -> bool:
    _LOCK_DIR.mkdir(parents=True, exist_ok=True)
    fd = os.open(_LOCK_DIR / f"domain_{domain_id}.lock", os.O_CREAT | os.O_RDWR, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return False
    _held_locks[domain_id] = fd
    return True


def _release(domain_id: int) -> None:
    os.close(_held_locks.pop(domain_id))


def domain_ports(domain_id: int) -> range:
    """The UDP and shared-memory ports DDS uses for ``domain_id``: 7400 + 250 * id and the 250 after it.

    The RTPS port mapping (port base 7400, domain gain 250; OMG DDSI-RTPS 2.5, section 9.6.1.1) that Fast
    DDS follows for both its UDP sockets and its shared-memory ports.
    """
    first = 7400 + 250 * domain_id
    return range(first, first + 250)


def ports_in_use() -> set[int]:
    """DDS ports some process on this machine holds: shared-memory ports (``/dev/shm``, seen across network
    namespaces) and UDP sockets bound in this network namespace. Ports of processes that died without
    cleaning up count too: such a domain is passed over, which costs nothing but its id."""
    ports: set[int] = set()
    try:
        names = os.listdir(_SHM_DIR)
    except OSError:
        names = []
    for name in names:
        match = _SHM_PORT.fullmatch(name)
        if match:
            ports.add(int(match.group(1)))
    for table in _UDP_TABLES:
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) > 1 and ":" in fields[1]:
                ports.add(int(fields[1].rsplit(":", 1)[1], 16))
    return ports


def claim_domain_id() -> int:
    """A domain id that no other process on this machine has claimed or uses; held until this process exits.

    The lock is an advisory ``flock`` that the kernel drops when the process dies, so a crashed run
    never leaves an id claimed. Programs that take no lock (another ROS 2 graph, a test run in another
    network namespace) are seen by the DDS ports they hold (:func:`ports_in_use`); an id whose ports are
    in use is passed over while a free one is left. Child processes inherit the id through the environment.
    """
    if _held_locks:
        return next(iter(_held_locks))
    start = DOMAIN_ID_MIN + os.getpid() % (DOMAIN_ID_MAX - DOMAIN_ID_MIN + 1)
    span = DOMAIN_ID_MAX - DOMAIN_ID_MIN + 1
    candidates = [DOMAIN_ID_MIN + (start - DOMAIN_ID_MIN + offset) % span for offset in range(span)]
    busy = ports_in_use()
    for candidate in candidates:
        if _try_claim(candidate):
            if not busy.intersection(domain_ports(candidate)):
                return candidate
            _release(candidate)
    for candidate in candidates:  # every free id shows DDS ports (left behind by dead processes): take a lock
        if _try_claim(candidate):
            return candidate
    raise ConfigError(f"every ROS domain id {DOMAIN_ID_MIN}-{DOMAIN_ID_MAX} is claimed by another process")


def ros_library_dirs() -> list[str]:
    """The folders processes need on ``LD_LIBRARY_PATH`` for ROS interface libraries: this virtual
    environment's ``lib`` when the ROS 2 wheels live in it (none on a ROS install, where sourcing its
    ``setup.bash`` does this)."""
    lib = Path(sys.prefix) / "lib"
    if sys.prefix == sys.base_prefix or not any(lib.glob("librcl*.so")):
        return []
    return [str(lib)]


def with_ros_library_path(env: MutableMapping[str, str]) -> MutableMapping[str, str]:
    """``env`` with :func:`ros_library_dirs` at the front of its ``LD_LIBRARY_PATH`` (each once)."""
    parts = [p for p in env.get("LD_LIBRARY_PATH", "").split(os.pathsep) if p]
    missing = [d for d in ros_library_dirs() if d not in parts]
    if missing:
        env["LD_LIBRARY_PATH"] = os.pathsep.join(missing + parts)
    return env


def network_safe_environment(base: Mapping[str, str] | None = None, *,
                             domain_id: int | None = None) -> dict[str, str]:
    """``base`` (default: this process's environment) with the loopback-only ROS settings added.

    A ``ROS_DOMAIN_ID`` already in ``base`` (exported by the user, or set up by a parent ladder_ros
    process) is kept when ``domain_id`` is None; an invalid one is an error naming it. Without one,
    a free id is claimed.
    """
    env = dict(os.environ if base is None else base)
    if domain_id is None:
        existing = env.get("ROS_DOMAIN_ID", "").strip()
        if existing:
            if not existing.isdigit() or int(existing) > ROS_DOMAIN_ID_MAX:
                raise ConfigError(f"the exported ROS_DOMAIN_ID must be an integer in [0, {ROS_DOMAIN_ID_MAX}], "
                                  f"got {existing!r}")
            domain_id = int(existing)
        else:
            domain_id = claim_domain_id()
    elif not DOMAIN_ID_MIN <= domain_id <= DOMAIN_ID_MAX:
        raise ConfigError(f"ROS_DOMAIN_ID must be in [{DOMAIN_ID_MIN}, {DOMAIN_ID_MAX}], got {domain_id}")
    env.update({
        "ROS_AUTOMATIC_DISCOVERY_RANGE": "LOCALHOST",
        "ROS_LOCALHOST_ONLY": "1",
        "ROS_DOMAIN_ID": str(domain_id),
        "FASTDDS_DEFAULT_PROFILES_FILE": str(fastdds_profile()),
        "RMW_IMPLEMENTATION": "rmw_fastrtps_cpp",
        "LADDER_ROS_NETWORK_SAFE": "1",
    })
    # Fast DDS 3 (Jazzy and newer, and the PyPI wheels) reads FASTDDS_…; it still reads the old
    # FASTRTPS_… name but logs a deprecation warning in every node. Fast DDS 2.6 (Humble) reads
    # only the old name.
    if env.get("ROS_DISTRO", "").lower() == "humble":
        env["FASTRTPS_DEFAULT_PROFILES_FILE"] = env["FASTDDS_DEFAULT_PROFILES_FILE"]
    else:
        env.pop("FASTRTPS_DEFAULT_PROFILES_FILE", None)
    env.pop("ROS_STATIC_PEERS", None)  # static peers could name another machine
    env.pop("ROS_DISCOVERY_SERVER", None)
    return dict(with_ros_library_path(env))


def apply_network_safe_environment(target: MutableMapping[str, str] | None = None, *,
                                   domain_id: int | None = None) -> dict[str, str]:
    """Write the loopback-only settings into ``target`` (default ``os.environ``); call before rclpy loads."""
    target = os.environ if target is None else target
    safe = network_safe_environment(target, domain_id=domain_id)
    target.update(safe)
    for key in ("ROS_STATIC_PEERS", "ROS_DISCOVERY_SERVER", "FASTRTPS_DEFAULT_PROFILES_FILE"):
        if key in safe:
            continue
        target.pop(key, None)
    return safe


def is_network_safe(env: Mapping[str, str] | None = None) -> bool:
    """True when ``env`` keeps ROS traffic on this machine."""
    env = os.environ if env is None else env
    return (env.get("ROS_AUTOMATIC_DISCOVERY_RANGE") == "LOCALHOST"
            and bool(env.get("FASTDDS_DEFAULT_PROFILES_FILE") or env.get("FASTRTPS_DEFAULT_PROFILES_FILE"))
            and env.get("ROS_DOMAIN_ID", "").isdigit())
