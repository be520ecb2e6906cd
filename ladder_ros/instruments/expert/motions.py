"""The arm motions the scripted expert builds its attempts from: servoing, pick-and-place, knocks, wandering.

Each motion is a generator: it yields one 7-D action in the action contract (translation delta, Euler
XYZ delta, gripper +1 open / -1 closed), is sent the next observation, and returns the last one seen,
so an attempt strings motions together with ``yield from``. The goals are re-read from the privileged
state every step, so a motion follows an object that moves.
"""

from __future__ import annotations

import math
from typing import Generator

import numpy as np

from ladder_ros.core.observation import Observation
from ladder_ros.instruments.expert.placement import free_spot, wrap_angle, yaw_of
from ladder_ros.instruments.expert.scene import support_z
from ladder_ros.instruments.expert.steering import ExpertSteering

MISSED_GRASP_HEIGHT_M = 0.045  # a premature close this far above the grasp height holds nothing
RELEASE_CLEARANCE_M = 0.02  # the object's underside stops this far above the surface, then drops
TYPICAL_REST_HEIGHT_M = 0.015  # centre height of an object held since before the attempt began
ARRIVAL_TOLERANCE_M = 0.008  # servo lag accepted on arrival (the target itself must be reached)
BLOCKED_LAG_M = 0.015  # the gripper trails its target by this much: it is pressing on something
# A knock starts 7 cm before the placed object and pushes 12 cm past it: off any container here.
KNOCK_LEAD_IN_M = 0.07
KNOCK_FOLLOW_THROUGH_M = 0.12
OPEN_BEFORE_DESCENT = 0.95  # the aperture a hand with slow fingers waits for before a grasp descent
# After a grasp of an object came up empty (the descent was blocked, or the fingers closed on nothing), the next
# one turns the fingers this far off the object's short side, in turn: an open finger that landed on a neighbour
# (a plate's rim beside a carrot) clears it, and a 2.6 cm wide carrot or spoon still fits between the pads
# (2.6 cm / cos 0.9 = 4.2 cm, the open pads 7 cm apart), as a learned policy's next try comes in at another angle.
REGRASP_TURNS_RAD = (0.0, 0.9, -0.9)

Motion = Generator[np.ndarray, Observation, Observation]


def target_of(obs: Observation) -> np.ndarray:
    """The controller target (deltas add to it); the measured pose where a robot reports none."""
    return obs.target_position if obs.target_position is not None else obs.ee_position


class ArmMotions:
    """Motions for one gripper (``steering``) over a table at ``table_z``; ``rng`` draws wander waypoints.

    ``rng`` is the expert's own generator, shared so that its draws keep one fixed order.
    """

    def __init__(self, steering: ExpertSteering, table_z: float, rng: np.random.Generator):
        self.steering = steering
        self.table_z = table_z
        self._rng = rng
        self.fumbles: dict[str, int] = {}  # grasps of each object that came up empty since forget_fumbles

    def forget_fumbles(self) -> None:
        """A new instruction: grasps start again square to each object."""
        self.fumbles.clear()

    @property
    def travel_z(self) -> float:
        """The height the gripper travels at between picks and places."""
        return self.table_z + self.steering.travel_height_m

    # -- single steps --------------------------------------------------------------------

    @staticmethod
    def hold(obs: Observation, gripper_open: bool) -> np.ndarray:
        """Stand still, the gripper open or closed."""
        return np.array([0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0 if gripper_open else -1.0])

    def action(self, obs: Observation, goal: np.ndarray, gripper_open: bool, yaw: float | None) -> np.ndarray:
        """One step towards ``goal`` (and heading ``yaw``), within the steering's limits, the wrist kept level."""
        delta = np.asarray(goal, dtype=np.float64) - target_of(obs)
        xy = np.linalg.norm(delta[:2])
        steer = self.steering
        if xy > steer.max_xy_step_m:
            delta[:2] *= steer.max_xy_step_m / xy
        delta[2] = float(np.clip(delta[2], -steer.max_z_step_m, steer.max_z_step_m))
        roll, pitch, current_yaw = (float(v) for v in obs.ee_euler)
        turn = steer.max_yaw_step_rad
        dyaw = 0.0 if yaw is None else float(np.clip(wrap_angle(yaw - current_yaw), -turn, turn))
        return np.array([delta[0], delta[1], delta[2], -roll, -pitch, dyaw, 1.0 if gripper_open else -1.0])

    # -- motions -------------------------------------------------------------------------

    def move(self, obs: Observation, goal_of, gripper_open: bool, yaw_of=None,
             timeout: int | None = None) -> Generator[np.ndarray, Observation, tuple[Observation, bool]]:
        """Servo the target to ``goal_of(obs)`` (re-read every step); True on arrival.

        A goal outside the workspace is reached when the controller stops moving the target
        towards it (the target is clipped to the workspace bounds).
        """
        previous_target: np.ndarray | None = None
        blocked = 0
        for _ in range(self.steering.move_timeout_steps if timeout is None else timeout):
            goal = goal_of(obs)
            if goal is None:
                return obs, False
            yaw = yaw_of(obs) if yaw_of is not None else None
            target = target_of(obs)
            clipped = previous_target is not None and np.linalg.norm(target - previous_target) < 2e-4
            aligned = yaw is None or abs(wrap_angle(yaw - float(obs.ee_euler[2]))) < 0.1
            lag = float(np.linalg.norm(target - obs.ee_position))
            if aligned and lag < ARRIVAL_TOLERANCE_M and (np.linalg.norm(goal - target) < 0.002 or clipped):
                return obs, True
            blocked = blocked + 1 if lag > BLOCKED_LAG_M else 0
            if blocked >= self.steering.blocked_steps:
                return obs, False  # something is in the way (a rim, a wall, another object)
            previous_target = target.copy()
            obs = yield self.action(obs, goal, gripper_open, yaw)
        return obs, False

    def hold_for(self, obs: Observation, steps: int, gripper_open: bool) -> Motion:
        for _ in range(steps):
            obs = yield self.hold(obs, gripper_open)
        return obs

    def open_before_descent(self, obs: Observation) -> Motion:
        """A hand that moves its fingers at a set speed may still be half shut from a missed grasp:
        hold open until it is open before going down around an object (at most one stroke's time)."""
        for _ in range(self.steering.open_wait_steps):
            if obs.aperture >= OPEN_BEFORE_DESCENT:
                break
            obs = yield self.hold(obs, gripper_open=True)
        return obs

    def hover(self, obs: Observation, steps: int) -> Motion:
        return (yield from self.hold_for(obs, steps, gripper_open=True))

    def rise(self, obs: Observation, gripper_open: bool) -> Motion:
        """Straight up to travel height when low, so reaching never drags through objects."""
        travel = self.travel_z
        if obs.ee_position[2] < travel - 0.02:
            here = target_of(obs)
            above = np.array([here[0], here[1], travel])
            obs, _ = yield from self.move(obs, lambda o: above, gripper_open)
        return obs

    def grasp_yaw(self, obs: Observation, instance: str) -> float | None:
        """The wrist heading that closes the fingers across ``instance``, nearest the current one; after
        grasps of it came up empty, turned by the next of :data:`REGRASP_TURNS_RAD`."""
        pose = obs.privileged.objects.get(instance)
        if pose is None:
            return None
        turn = REGRASP_TURNS_RAD[self.fumbles.get(instance, 0) % len(REGRASP_TURNS_RAD)]
        yaw = yaw_of(pose.quaternion) + turn  # fingers close across the object's x axis (its long side)
        current = float(obs.ee_euler[2])
        options = [yaw + k * math.pi for k in (-2, -1, 0, 1, 2) if abs(yaw + k * math.pi) < math.pi - 0.2]
        return min(options, key=lambda a: abs(a - current)) if options else wrap_angle(yaw)

    def pick_and_place(self, obs: Observation, instance: str, destination: str, *,
                       missed: bool, release_at: float | None, table_spot: np.ndarray | None = None) -> Generator:
        """Pick ``instance`` and put it on ``destination`` (or on the table at ``table_spot``)."""
        if instance in obs.privileged.grasped:
            rest_height = TYPICAL_REST_HEIGHT_M
        else:
            obs, rest_height = yield from self._grasp(obs, instance, missed)
            if rest_height is None:
                return
        yield from self._place(obs, instance, destination, rest_height, release_at, table_spot)

    def _grasp(self, obs: Observation, instance: str,
               missed: bool) -> Generator[np.ndarray, Observation, tuple[Observation, float | None]]:
        """Reach over ``instance``, go down around it, close and lift. Returns the height it rested at
        above its support, or None when it is not in hand (unreachable, or missed: the next attempt
        opens the gripper and tries again)."""
        travel = self.travel_z
        start_z = float(obs.privileged.objects[instance].position[2])
        rest_height = max(start_z - support_z(obs.privileged, instance, self.table_z), 0.005)
        obs = yield from self.rise(obs, gripper_open=True)

        def above(o: Observation):
            pose = o.privileged.objects.get(instance)
            return None if pose is None else np.array([pose.position[0], pose.position[1], travel])

        def heading(o: Observation) -> float | None:
            return self.grasp_yaw(o, instance)

        obs, ok = yield from self.move(obs, above, True, heading)
        if not ok:
            return obs, None
        obs = yield from self.open_before_descent(obs)

        def grasp_point(o: Observation):
            pose = o.privileged.objects.get(instance)
            if pose is None:
                return None
            z = float(pose.position[2]) + (MISSED_GRASP_HEIGHT_M if missed else 0.0)
            return np.array([pose.position[0], pose.position[1], z])

        obs, ok = yield from self.move(obs, grasp_point, True, heading)
        if not ok:
            self._fumbled(instance)
            return obs, None
        obs = yield from self.hold_for(obs, self.steering.close_steps, gripper_open=False)
        lift = target_of(obs).copy()
        lift[2] = travel
        obs, _ = yield from self.move(obs, lambda o: lift, False)
        if instance in obs.privileged.grasped:
            return obs, rest_height
        if not missed:  # a premature close was meant to miss: only a real grasp that failed turns the next one
            self._fumbled(instance)
        return obs, None

    def _fumbled(self, instance: str) -> None:
        self.fumbles[instance] = self.fumbles.get(instance, 0) + 1

    def _place(self, obs: Observation, instance: str, destination: str, rest_height: float,
               release_at: float | None, table_spot: np.ndarray | None) -> Generator:
        """Carry the held ``instance`` over a free spot, lower it until it nearly rests there, open and retreat."""
        travel = self.travel_z
        hang = float(obs.privileged.objects[instance].position[2] - obs.ee_position[2])
        if table_spot is None:
            spot, turn = free_spot(obs.privileged, destination, instance, self.steering)
            surface_z = float(obs.privileged.destination(destination).surface_z)
        else:
            spot, turn, surface_z = table_spot, 0.0, self.table_z
        place_yaw = float(obs.ee_euler[2]) + turn
        if abs(place_yaw) > math.pi - 0.2:
            place_yaw = wrap_angle(place_yaw + math.pi)  # the same placement, with the wrist in range
        obs, arrived = yield from self._carry(obs, instance, np.array([spot[0], spot[1], travel]), place_yaw,
                                              release_at)
        if not arrived:
            return
        release_z = surface_z + rest_height + RELEASE_CLEARANCE_M - hang
        obs, _ = yield from self.move(obs, lambda o: np.array([spot[0], spot[1], release_z]), False,
                                      lambda o: place_yaw)
        obs = yield from self.hold_for(obs, self.steering.open_steps, gripper_open=True)
        yield from self.move(obs, lambda o: np.array([spot[0], spot[1], travel]), True)

    def _carry(self, obs: Observation, instance: str, over: np.ndarray, place_yaw: float,
               release_at: float | None) -> Generator[np.ndarray, Observation, tuple[Observation, bool]]:
        """Carry the held ``instance`` to ``over`` turned to ``place_yaw``; True on arrival with it in hand.

        With ``release_at`` the gripper opens once that fraction of the way is behind it (an early
        release: the object falls wherever it is).
        """
        begin = obs.ee_position[:2].copy()
        path = float(np.linalg.norm(over[:2] - begin))
        for _ in range(self.steering.move_timeout_steps):
            if instance not in obs.privileged.grasped:
                return obs, False  # dropped in transit
            if (np.linalg.norm(over - target_of(obs)) < 0.002
                    and np.linalg.norm(over - obs.ee_position) < ARRIVAL_TOLERANCE_M
                    and abs(wrap_angle(place_yaw - float(obs.ee_euler[2]))) < 0.1):
                return obs, True
            if release_at is not None and path > 0 and \
                    np.linalg.norm(obs.ee_position[:2] - begin) >= release_at * path:
                obs = yield from self.hold_for(obs, self.steering.open_steps, gripper_open=True)
                return obs, False
            obs = yield self.action(obs, over, False, place_yaw)
        return obs, False

    def knock(self, obs: Observation, victim: tuple[str, str]) -> Motion:
        """Reach low past a placed object and sweep it off its container (a clumsy reach)."""
        name, container = victim
        priv = obs.privileged
        pos = priv.objects[name].position
        centre = priv.containers[container].position
        direction = pos[:2] - centre[:2]
        norm = float(np.linalg.norm(direction))
        direction = direction / norm if norm > 1e-3 else np.array([1.0, 0.0])
        yaw = wrap_angle(math.atan2(direction[1], direction[0]) - math.pi / 2)  # a pad leads the sweep
        if abs(yaw) > math.pi / 2:
            yaw = wrap_angle(yaw + math.pi)
        travel = self.travel_z
        low = float(pos[2]) + 0.005
        start = pos[:2] - KNOCK_LEAD_IN_M * direction
        end = pos[:2] + KNOCK_FOLLOW_THROUGH_M * direction
        obs = yield from self.rise(obs, gripper_open=True)
        obs, ok = yield from self.move(obs, lambda o: np.array([start[0], start[1], travel]), True, lambda o: yaw)
        if not ok:
            return obs
        obs, _ = yield from self.move(obs, lambda o: np.array([start[0], start[1], low]), True, lambda o: yaw)
        obs, _ = yield from self.move(obs, lambda o: np.array([end[0], end[1], low]), True, lambda o: yaw)
        obs, _ = yield from self.move(obs, lambda o: np.array([end[0], end[1], travel]), True)
        return obs

    def wander(self, obs: Observation, steps: int) -> Motion:
        """Aimless reaching: random waypoints for ``steps`` steps, gripper open."""
        (x_lo, x_hi), (y_lo, y_hi), (z_lo, z_hi) = self.steering.wander_region
        remaining = steps
        while remaining > 0:
            goal = np.array([self._rng.uniform(x_lo, x_hi), self._rng.uniform(y_lo, y_hi),
                             self.table_z + self._rng.uniform(z_lo, z_hi)])
            for _ in range(min(remaining, 6 * self.steering.time_scale)):  # a new waypoint every 1.2 s
                obs = yield self.action(obs, goal, True, None)
                remaining -= 1
        return obs
