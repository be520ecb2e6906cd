"""Where sim-eval's episodes run: in this process, in local processes, or on a Ray cluster.

The three are implementations of one small interface, :class:`EpisodeExecutor`: ``submit(job)``
hands a job to a worker, ``next_outcome()`` blocks until one of the jobs in flight comes back as

* :class:`Finished`: the worker returned the job's payload (an episode record, or an error record
  when the episode itself raised: that is a result, and it is never rerun), with where it ran; or
* :class:`Lost`: the process or machine running it died and nothing came back.

:func:`drive` is the one loop over an executor: it keeps the executor fed, reruns a lost job at
most ``max_attempts - 1`` times and then gives it up, and reports every retry with the job's
outcome so that it is written down, never silent. A worker that cannot run episodes at all (assets
or the Vulkan driver missing on that machine, another version of the code computing another run
key) raises :class:`WorkerSetupError` with one line naming the worker, and the sweep stops.

Workers run :func:`run_in_worker` with a :class:`WorkSpec`: its ``setup(config)`` runs once per
worker process (and again when another configuration arrives), its ``run(job)`` once per job. Both
are module-level functions, so a worker imports them by name; a Ray worker therefore needs this
package installed, which is what running ``scripts/setup.sh`` on every machine of a cluster does.
"""

from __future__ import annotations

import os
import secrets
import socket
import sys
from abc import ABC, abstractmethod
from collections import deque
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from typing import Any, Callable, Hashable, Mapping

from ladder_ros.core.errors import ConfigError, LadderError

EXECUTORS = ("local", "ray")
DEFAULT_MAX_RETRIES = 2  # reruns of an episode whose worker died, before it is recorded as an error

# What run_in_worker returns first.
DONE, READY, SETUP_FAILED = "done", "ready", "setup_failed"


class WorkerSetupError(LadderError):
    """A worker cannot run episodes at all; the message names the worker."""


@dataclass(frozen=True)
class WorkSpec:
    """What a worker runs: ``setup(config)`` once per process, then ``run(job)`` per job.

    ``setup`` returns a report of the worker's own view of the run, which the driver checks (the
    ``check`` given to :meth:`EpisodeExecutor.start`); ``key`` names the configuration, so a process
    that served another one sets up again. Everything here travels to the workers by pickle.
    """

    setup: Callable[[Any], dict]
    run: Callable[[Any], dict]
    config: Any
    key: str


ReportCheck = Callable[[dict], "str | None"]  # driver side: None when a setup report is fine, else what is wrong


@dataclass(frozen=True)
class Finished:
    job: Hashable
    payload: dict
    worker: dict


@dataclass(frozen=True)
class Lost:
    job: Hashable
    reason: str


Outcome = Finished | Lost


@dataclass(frozen=True)
class ExecutorSettings:
    """How episodes are run; validated on construction (the CLI's ``--executor`` and friends)."""

    kind: str = "local"
    jobs: int = 1  # local processes; for a Ray instance started here, its CPUs
    ray_address: str | None = None  # None: start a private single-machine Ray instance
    cpus_per_episode: float = 1.0
    gpus_per_episode: float = 0.0
    env_vars: tuple[tuple[str, str], ...] = ()  # Ray runtime_env env_vars, set in every worker
    max_retries: int = DEFAULT_MAX_RETRIES

    def __post_init__(self) -> None:
        if self.kind not in EXECUTORS:
            raise ConfigError(f"unknown executor {self.kind!r}; valid: {', '.join(EXECUTORS)}")
        if self.jobs < 1:
            raise ConfigError(f"jobs must be >= 1, got {self.jobs}")
        if self.max_retries < 0:
            raise ConfigError(f"max-retries must be >= 0, got {self.max_retries}")
        if not self.cpus_per_episode > 0:
            raise ConfigError(f"cpus-per-episode must be > 0, got {self.cpus_per_episode}")
        if not 0 <= self.gpus_per_episode:
            raise ConfigError(f"gpus-per-episode must be >= 0, got {self.gpus_per_episode}")
        if self.gpus_per_episode > 1 and self.gpus_per_episode != int(self.gpus_per_episode):
            raise ConfigError(f"gpus-per-episode above 1 must be a whole number, got {self.gpus_per_episode}")
        if self.kind == "local":
            for name, value, default in (("ray-address", self.ray_address, None),
                                         ("cpus-per-episode", self.cpus_per_episode, 1.0),
                                         ("gpus-per-episode", self.gpus_per_episode, 0.0),
                                         ("ray-env", self.env_vars, ())):
                if value != default:
                    raise ConfigError(f"{name} needs --executor ray (local processes take one core each "
                                      "and share no GPU)")
        for name, _ in self.env_vars:
            if not name or "=" in name:
                raise ConfigError(f"ray-env needs NAME=VALUE, got {name!r}")

    @property
    def max_attempts(self) -> int:
        return 1 + self.max_retries


def parse_env_vars(items: list[str]) -> tuple[tuple[str, str], ...]:
    """``["NAME=VALUE", ...]`` as pairs; a malformed item is named."""
    pairs = []
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise ConfigError(f"ray-env needs NAME=VALUE, got {item!r}")
        pairs.append((name.strip(), value))
    return tuple(pairs)


# ---------------------------------------------------------------- worker side
_READY: dict = {}


def worker_identity() -> dict:
    """Where this process runs: host and pid, and on Ray its node and the GPUs it was given."""
    where: dict = {"host": socket.gethostname(), "pid": os.getpid()}
    ray = _ray_if_connected()
    if ray is not None:
        context = ray.get_runtime_context()
        where["node_id"] = context.get_node_id()
        where["node_ip"] = ray.util.get_node_ip_address()
        gpus = context.get_accelerator_ids().get("GPU", [])
        if gpus:
            where["gpu_ids"] = list(gpus)
    return where


def describe_worker(where: Mapping) -> str:
    text = f"{where.get('host', '?')} (pid {where.get('pid', '?')}"
    if where.get("node_ip"):
        text += f", Ray node {where['node_ip']} {str(where.get('node_id', ''))[:12]}"
    return text + ")"


def _ray_if_connected():
    ray = sys.modules.get("ray")
    if ray is None or not ray.is_initialized():
        return None
    return ray


def run_in_worker(work: WorkSpec, job: Any) -> tuple[str, Any, dict]:
    """One job in a worker process (``job`` None: only set up, and report).

    Returns ``(DONE, payload, where)``, ``(READY, setup report, where)`` or ``(SETUP_FAILED,
    message, where)``. An exception from ``run`` is not caught here: ``run`` turns what an episode
    raises into a record itself, so anything escaping it is a defect that stops the sweep.
    """
    where = worker_identity()
    if _READY.get("key") != work.key:
        _READY.clear()
        try:
            report = work.setup(work.config)
        except Exception as exc:  # noqa: BLE001 - reported to the driver, naming this worker
            return SETUP_FAILED, f"{type(exc).__name__}: {exc}", where
        _READY.update(key=work.key, report=report)
    if job is None:
        return READY, _READY["report"], where
    return DONE, work.run(job), where


def _outcome(job: Any, result: tuple[str, Any, dict], check: ReportCheck | None) -> Outcome:
    status, payload, where = result
    if status == SETUP_FAILED:
        raise WorkerSetupError(f"worker {describe_worker(where)} cannot run episodes: {payload}")
    if status == READY:
        problem = check(payload) if check else None
        if problem:
            raise WorkerSetupError(f"worker {describe_worker(where)}: {problem}")
    return Finished(job, payload, where)


# ---------------------------------------------------------------- the interface
class EpisodeExecutor(ABC):
    """Runs jobs somewhere; see the module docstring."""

    name: str = ""

    def __init__(self) -> None:
        self.work: WorkSpec | None = None
        self.check: ReportCheck | None = None

    def __enter__(self) -> "EpisodeExecutor":
        return self

    def __exit__(self, exc_type: object, *exc: object) -> None:
        self.close(abort=exc_type is not None)

    def start(self, work: WorkSpec, check: ReportCheck | None = None) -> dict:
        """Get workers ready for ``work``; returns a description of where episodes will run.
        ``check`` judges each worker's setup report where the executor asks for one."""
        self.work, self.check = work, check
        return self._start()

    @abstractmethod
    def _start(self) -> dict: ...

    @abstractmethod
    def submit(self, job: Any) -> None: ...

    @abstractmethod
    def next_outcome(self) -> Outcome:
        """Block until a job in flight comes back."""

    @property
    @abstractmethod
    def in_flight(self) -> int: ...

    def has_room(self) -> bool:
        """Whether another job should be submitted now (the default: always)."""
        return True

    def close(self, abort: bool = False) -> None:
        """Release the workers (idempotent); ``abort``: do not wait for episodes still running."""


@dataclass
class DriveReport:
    finished: int = 0
    given_up: int = 0
    retries: int = 0
    lost: list[str] = field(default_factory=list)


def drive(executor: EpisodeExecutor, jobs: list, *, max_attempts: int,
          on_finished: Callable[[Finished, list[str]], None],
          on_given_up: Callable[[Any, list[str]], None],
          on_lost: Callable[[Lost, int], None] | None = None) -> DriveReport:
    """Run every job to an outcome. A lost job is rerun until it was tried ``max_attempts`` times;
    ``on_finished(outcome, lost)`` and ``on_given_up(job, lost)`` get the reasons of every loss, and
    ``on_lost(outcome, attempts so far)`` hears of each loss when it happens."""
    if max_attempts < 1:
        raise ConfigError(f"max_attempts must be >= 1, got {max_attempts}")
    pending = deque(jobs)
    losses: dict[Any, list[str]] = {}
    report = DriveReport()
    while pending or executor.in_flight:
        while pending and executor.has_room():
            executor.submit(pending.popleft())
        outcome = executor.next_outcome()
        if isinstance(outcome, Lost):
            reasons = losses.setdefault(outcome.job, [])
            reasons.append(outcome.reason)
            report.lost.append(outcome.reason)
            if on_lost is not None:
                on_lost(outcome, len(reasons))
            if len(reasons) < max_attempts:
                report.retries += 1
                pending.appendleft(outcome.job)
            else:
                report.given_up += 1
                on_given_up(outcome.job, losses.pop(outcome.job))
        else:
            report.finished += 1
            on_finished(outcome, losses.pop(outcome.job, []))
    return report


# ---------------------------------------------------------------- in this process
class InProcessExecutor(EpisodeExecutor):
    """Runs each job in this process when its outcome is asked for (``--jobs 1``)."""

    name = "in_process"

    def __init__(self) -> None:
        super().__init__()
        self._queue: deque = deque()

    def _start(self) -> dict:
        _outcome(None, run_in_worker(self.work, None), self.check)
        return {"executor": "local", "processes": 1}

    def submit(self, job: Any) -> None:
        self._queue.append(job)

    @property
    def in_flight(self) -> int:
        return len(self._queue)

    def has_room(self) -> bool:
        return not self._queue

    def next_outcome(self) -> Outcome:
        job = self._queue.popleft()
        return _outcome(job, run_in_worker(self.work, job), self.check)


# ---------------------------------------------------------------- local processes
class LocalProcessExecutor(EpisodeExecutor):
    """``jobs`` worker processes on this machine (``concurrent.futures``).

    At most ``jobs`` episodes are in flight, one per process. When a process dies the pool breaks
    and cannot say which episode killed it, so every episode in flight at that moment counts the
    loss and is rerun in a fresh pool. The first to notice replaces the pool: an outcome of the
    current pool that comes back broken, or a submit that finds it broken.
    """

    name = "local"

    def __init__(self, jobs: int) -> None:
        super().__init__()
        self.jobs = jobs
        self._pool: ProcessPoolExecutor | None = None
        self._generation = 0
        self._futures: dict[Future, tuple[Any, int]] = {}

    def _new_pool(self) -> None:
        import multiprocessing

        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
        ctx = multiprocessing.get_context("fork" if sys.platform.startswith("linux") else "spawn")
        self._pool = ProcessPoolExecutor(max_workers=self.jobs, mp_context=ctx)
        self._generation += 1

    def _start(self) -> dict:
        self._new_pool()
        return {"executor": "local", "processes": self.jobs}

    def submit(self, job: Any) -> None:
        try:
            future = self._pool.submit(run_in_worker, self.work, job)
        except BrokenProcessPool:
            # A worker died after the last outcome was collected: the job goes to a fresh pool, and the
            # episodes of the broken one come back Lost from next_outcome (their generation is now the old one).
            self._new_pool()
            future = self._pool.submit(run_in_worker, self.work, job)
        self._futures[future] = (job, self._generation)

    @property
    def in_flight(self) -> int:
        return len(self._futures)

    def has_room(self) -> bool:
        return len(self._futures) < self.jobs

    def next_outcome(self) -> Outcome:
        done, _ = wait(list(self._futures), return_when=FIRST_COMPLETED)
        future = next(iter(done))
        job, generation = self._futures.pop(future)
        try:
            result = future.result()
        except BrokenProcessPool:
            if generation == self._generation:
                self._new_pool()
            return Lost(job, "a local worker process died while episodes were running (each counts the loss)")
        return _outcome(job, result, self.check)

    def close(self, abort: bool = False) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=not abort, cancel_futures=True)
            self._pool = None
        self._futures.clear()


# ---------------------------------------------------------------- Ray
class RayExecutor(EpisodeExecutor):
    """One Ray task per episode on a Ray cluster, with its resources declared.

    ``address`` None starts a private Ray instance on this machine with ``jobs`` CPUs, bound to
    127.0.0.1 (Ray's own ``ray.init(address="local")``); otherwise it connects to the cluster there
    (``ray start`` on every machine). Every episode is a task asking ``cpus_per_episode`` CPUs and
    ``gpus_per_episode`` GPUs (a fraction shares one GPU; Ray sets ``CUDA_VISIBLE_DEVICES`` for the
    task). Ray's own task retries are off (``max_retries=0``): a task whose worker or node died comes
    back :class:`Lost` and :func:`drive` decides, so every rerun is written down. Before the first
    episode one check task runs on each node that can take an episode: it sets up as a worker would
    (assets, Vulkan driver, run key) and a node that cannot is named in one error. Episodes are
    scheduled ``"SPREAD"`` (Ray's strategy that puts tasks on different nodes): under Ray's default
    one, a task goes to the driver's node while the driver's view of the others is stale (just after
    the check tasks left them busy), and the driver then reuses that node's worker for every later
    episode, so a sweep on two nodes ran on one.
    """

    name = "ray"

    def __init__(self, settings: ExecutorSettings) -> None:
        super().__init__()
        self.settings = settings
        self._refs: dict[Any, Any] = {}
        self._remote = None
        self._connected = False

    def _import_ray(self):
        # Ray reports usage statistics to its vendor unless told not to; nothing leaves the machine.
        os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
        if self.settings.ray_address is None and not _has_ray_token():
            # A private instance gets a token of its own in this process's environment (its processes
            # inherit it) instead of one Ray would generate and save under ~/.ray for every later cluster.
            os.environ.setdefault("RAY_AUTH_MODE", "token")
            os.environ["RAY_AUTH_TOKEN"] = secrets.token_hex(32)
        try:
            import ray
        except ImportError:
            raise ConfigError("--executor ray needs the ray package: pip install -r requirements/ray.txt") from None
        return ray

    def _start(self) -> dict:
        ray = self._import_ray()
        s = self.settings
        options: dict = {"include_dashboard": False, "log_to_driver": False, "ignore_reinit_error": False}
        if s.env_vars:
            options["runtime_env"] = {"env_vars": dict(s.env_vars)}
        if s.ray_address is None:
            options.update(address="local", num_cpus=s.jobs, _node_ip_address="127.0.0.1")
            if s.gpus_per_episode == 0:
                options["num_gpus"] = 0
        else:
            options["address"] = s.ray_address
        try:
            ray.init(**options)
        except (ConnectionError, RuntimeError, ValueError) as exc:
            where = s.ray_address or "a local instance"
            raise ConfigError(f"cannot start or reach Ray at {where}: {str(exc).splitlines()[0]}") from None
        self._connected = True
        self._remote = ray.remote(run_in_worker)
        nodes = self._usable_nodes(ray)
        self._check_nodes(ray, nodes)
        return {"executor": "ray", "address": s.ray_address or "local", "nodes": len(nodes),
                "cpus_per_episode": s.cpus_per_episode, "gpus_per_episode": s.gpus_per_episode,
                "episode_slots": sum(n["slots"] for n in nodes)}

    def _usable_nodes(self, ray) -> list[dict]:
        s = self.settings
        nodes = []
        for node in ray.nodes():
            if not node.get("Alive"):
                continue
            res = node.get("Resources", {})
            slots = int(res.get("CPU", 0) // s.cpus_per_episode)
            if s.gpus_per_episode:
                slots = min(slots, int(res.get("GPU", 0) // s.gpus_per_episode))
            if slots >= 1:
                nodes.append({"id": node["NodeID"], "ip": node.get("NodeManagerAddress", "?"), "slots": slots})
        if not nodes:
            raise ConfigError(f"no node of the Ray cluster has {s.cpus_per_episode} CPU(s) and "
                              f"{s.gpus_per_episode} GPU(s) for an episode (cluster: "
                              f"{ray.cluster_resources()})")
        return nodes

    def _check_nodes(self, ray, nodes: list[dict]) -> None:
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        checks = {}
        for node in nodes:
            ref = self._task_options(NodeAffinitySchedulingStrategy(node["id"], soft=False)).remote(self.work, None)
            checks[ref] = node
        for ref, node in checks.items():
            try:
                result = ray.get(ref)
            except ray.exceptions.RayError as exc:
                raise WorkerSetupError(f"Ray node {node['ip']} ({node['id'][:12]}) could not run the setup check: "
                                       f"{_first_line(exc)}") from None
            _outcome(None, result, self.check)

    def _task_options(self, scheduling_strategy: Any = None):
        s = self.settings
        options = {"num_cpus": s.cpus_per_episode, "num_gpus": s.gpus_per_episode, "max_retries": 0,
                   "retry_exceptions": False}
        if scheduling_strategy is not None:
            options["scheduling_strategy"] = scheduling_strategy
        return self._remote.options(**options)

    def submit(self, job: Any) -> None:
        self._refs[self._task_options("SPREAD").remote(self.work, job)] = job

    @property
    def in_flight(self) -> int:
        return len(self._refs)

    def next_outcome(self) -> Outcome:
        import ray

        ready, _ = ray.wait(list(self._refs), num_returns=1)
        ref = ready[0]
        job = self._refs.pop(ref)
        try:
            result = ray.get(ref)
        except ray.exceptions.RayTaskError as exc:
            # the function itself raised in the worker: it could not be loaded there, or a defect
            raise WorkerSetupError(f"worker on Ray node {getattr(exc, 'ip', '?')} (pid {getattr(exc, 'pid', '?')}) "
                                   f"failed: {_first_line(exc.cause if exc.cause else exc)}") from None
        except ray.exceptions.RayError as exc:
            return Lost(job, f"{type(exc).__name__}: {_first_line(exc)}")
        return _outcome(job, result, self.check)

    def close(self, abort: bool = False) -> None:
        if self._connected:
            import ray

            for ref in list(self._refs):
                ray.cancel(ref, force=True)
            self._refs.clear()
            ray.shutdown()
            self._connected = False


def _has_ray_token() -> bool:
    return bool(os.environ.get("RAY_AUTH_TOKEN") or os.environ.get("RAY_AUTH_TOKEN_PATH")
                or os.path.exists(os.path.expanduser("~/.ray/auth_token")))


def _first_line(exc: BaseException) -> str:
    lines = [x.strip() for x in str(exc).splitlines() if x.strip()]
    return lines[0] if lines else type(exc).__name__


def make_executor(settings: ExecutorSettings) -> EpisodeExecutor:
    if settings.kind == "ray":
        return RayExecutor(settings)
    return InProcessExecutor() if settings.jobs == 1 else LocalProcessExecutor(settings.jobs)
