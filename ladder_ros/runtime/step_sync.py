"""Pairs one control step's messages from several topics, by time stamp, in step order.

Topics are delivered independently: a node may see step ``t``'s joint state before its pose, or
before the episode status that says which episode step ``t`` belongs to. :class:`StepAligner`
holds what arrived, keyed by stamp, and releases a step only when every required input of that
step is in, strictly in step order (lockstep: no step is skipped). Stamps map to steps through the
episode's clock origin and rate (:func:`ladder_ros.messages.step_of_stamp`); origins never repeat
across episodes, so a late message of a past episode can never pass for one of the current one.
No rclpy here: the rule is tested on its own.
"""

from __future__ import annotations

from typing import Any, Iterable

from ladder_ros.messages import stamp_of_step, step_of_stamp

DEFAULT_CAPACITY = 256  # messages held before the oldest are dropped (a few steps of every topic)


class StepAligner:
    """Collects per-step inputs and hands out complete steps in order."""

    def __init__(self, required: Iterable[str] = (), capacity: int = DEFAULT_CAPACITY):
        self.required = frozenset(required)
        self.capacity = capacity
        self.origin_ns: int | None = None
        self.rate_hz = 0.0
        self.next_step = 0
        self._unassigned: list[tuple[int, str, Any]] = []  # (stamp, name, payload) before an episode is known
        self._steps: dict[int, dict[str, Any]] = {}
        self._joining = False

    def start(self, origin_ns: int, rate_hz: float, required: Iterable[str] | None = None, *,
              join: bool = False) -> None:
        """A new episode: forget older steps; messages already here for this episode are kept.

        ``join``: the node came up while the episode was under way (it restarted), so the first
        step it sees, whichever it is, is where it starts.
        """
        if required is not None:
            self.required = frozenset(required)
        self.origin_ns, self.rate_hz = int(origin_ns), float(rate_hz)
        self.next_step = 0
        self._joining = join
        self._steps = {}
        self._replay_held()

    def _replay_held(self) -> None:
        held, self._unassigned = self._unassigned, []
        for stamp, name, payload in held:
            self.add(stamp, name, payload)

    def stop(self) -> None:
        """The episode is over: drop its steps; messages held for a later episode stay."""
        self.origin_ns = None
        self._steps = {}

    def add(self, stamp_ns: int, name: str, payload: Any) -> None:
        """One message, placed by its stamp.

        Before any episode it is held. A stamp before the next expected step is stale (an earlier
        step, a repeat, a past episode) and dropped. In lockstep nothing of the running episode can
        come later than the next expected step (the simulator waits for this step's decisions), so
        a later stamp belongs to an episode not announced here yet and is held until its start.
        """
        if self.origin_ns is None:
            self._hold(stamp_ns, name, payload)
            return
        if self._joining:
            step = step_of_stamp(self.origin_ns, self.rate_hz, stamp_ns)
            if step is None:
                return
            self.next_step, self._joining = step, False
        expected = stamp_of_step(self.origin_ns, self.rate_hz, self.next_step)
        if stamp_ns < expected:
            return
        if stamp_ns > expected:
            self._hold(stamp_ns, name, payload)
            return
        self._steps.setdefault(self.next_step, {})[name] = payload

    def _hold(self, stamp_ns: int, name: str, payload: Any) -> None:
        self._unassigned.append((stamp_ns, name, payload))
        del self._unassigned[:-self.capacity]

    def pop_ready(self) -> list[tuple[int, dict[str, Any]]]:
        """Complete steps from ``next_step`` on, in order; stops at the first incomplete one."""
        ready = []
        while self.origin_ns is not None:
            inputs = self._steps.get(self.next_step)
            if inputs is None or not self.required.issubset(inputs):
                break
            ready.append((self.next_step, self._steps.pop(self.next_step)))
            self.next_step += 1
            self._replay_held()
        return ready
