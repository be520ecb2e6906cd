"""The Franka rehearsal without ROS: the scripted sweep in pi0.5-DROID's joint-position format, and its plan.

The chunks must pass the policy node's own checks for the config (shape, bounds, the seam between
chunks), and the motion must give the Franka trigger what it ends an attempt on (Appendix B: a close
of 21 steps with a lift of 3 cm, the next release after the 57-step cooldown), however long the hand
takes to close: the project's own trigger is fed the hand as the requests showed it and the height
from the driver's forward kinematics. The server answers a joint-position config with the sweep and never
waits for a privileged state (there is no scene).
"""

import numpy as np
import pytest

from ladder_ros.core.errors import InvalidInputError, LadderError
from ladder_ros.core.presets import get_preset
from ladder_ros.core.suite import load_suite
from ladder_ros.paths import resolve_share_file
from ladder_ros.policies.actions import ActionProcessor
from ladder_ros.policies.factory import load_policy
from ladder_ros.instruments.rehearsal.server import NO_EPISODE, RehearsalPolicy
from ladder_ros.instruments.rehearsal.sweep import SweepChunker, joint_hold_chunk, lift_offset
from ladder_ros.instruments.expert.noise import ExpertNoise
from ladder_ros.policies.warmup import WARM_UP_PROMPT
from ladder_ros.robots.franka import READY_JOINTS, forward_kinematics

CONFIG = load_policy("droid_pi05_server")


def request(joints=READY_JOINTS, gripper=0.0, prompt="put the cup in the bin"):
    return {"observation/joint_position": np.array(joints, dtype=np.float64),
            "observation/gripper_position": np.array([gripper]), "prompt": prompt}


def run_sweep(chunks: int, hand_lag_steps: int = 0,
              arm_gain: float = 1.0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The rows the policy node would execute from ``chunks`` consecutive chunks (checked as it checks them), the
    gripper position each request showed and the joints the arm had at each step: the hand reaches what was
    commanded ``hand_lag_steps`` later; the arm covers ``arm_gain`` of the way to its commanded joints each step
    (1: at once; less: an arm that runs behind, its actions held for their age or its simulator slow)."""
    chunker, processor = SweepChunker(CONFIG), ActionProcessor(CONFIG)
    commanded, rows = [0.0], []
    joints = [np.array(READY_JOINTS)]
    for _ in range(chunks):
        seen = commanded[max(0, len(commanded) - 1 - hand_lag_steps)]
        executed = processor.check_chunk(chunker.chunk(request(joints[-1], gripper=seen)))
        rows.append(executed)
        commanded += [float(g) for g in executed[:, 7]]
        for row in executed:
            joints.append(joints[-1] + arm_gain * (np.asarray(row[:7], dtype=np.float64) - joints[-1]))
    hand = np.array([commanded[max(0, k - hand_lag_steps)] for k in range(1, len(commanded))])
    return np.concatenate(rows), hand, np.array(joints[1:])


def executed_rows(chunks: int) -> np.ndarray:
    return run_sweep(chunks)[0]


def test_the_lift_offset_raises_the_hand_and_keeps_it_over_the_same_spot():
    centre = np.array(READY_JOINTS)
    before, after = forward_kinematics(centre)[:3, 3], forward_kinematics(centre + lift_offset(centre, 0.05))[:3, 3]
    assert after[2] - before[2] == pytest.approx(0.05, abs=0.003)
    assert np.hypot(*(after[:2] - before[:2])) < 0.01


def test_sweep_chunks_pass_the_policy_nodes_checks_and_join_without_a_jump():
    rows = executed_rows(40)
    assert rows.shape == (40 * CONFIG.execute_steps, 8)
    steps = np.abs(np.diff(rows[:, :7], axis=0)).max()
    assert steps < CONFIG.seam.max_joint_rad / 4  # chunk seams included: one step's motion, far below the limit
    assert set(np.unique(rows[:, 7])) == {0.0, 1.0}
    assert np.allclose(rows[0, :7], READY_JOINTS)  # it starts where the arm stands


@pytest.mark.parametrize("hand_lag_steps, arm_gain", [(0, 1.0), (12, 1.0), (45, 1.0), (12, 0.2), (12, 0.05),
                                                      (45, 0.03)])
def test_every_cycle_is_an_attempt_the_franka_trigger_ends_however_slow_the_hand_and_the_arm(
        hand_lag_steps, arm_gain):
    """An instant hand; 0.8 s; 3 s on a busy machine; and an arm that follows its commands at once or slowly
    (a time constant of 5 to 33 steps): the trigger sees the height the arm really has."""
    from ladder_ros.core.triggers import GripperTrigger

    trigger = GripperTrigger(get_preset("franka").trigger)
    _, hand, arm = run_sweep(100, hand_lag_steps, arm_gain)  # 800 steps
    ends = []
    for step, (joints, closed) in enumerate(zip(arm, hand)):
        end = trigger.update(step, 1.0 - closed, forward_kinematics(joints)[2, 3])
        if end is not None:
            ends.append(end)
    assert len(ends) >= 2 and all(e.reason == "release" for e in ends), ends
    assert all(e.lift_m >= 0.04 for e in ends), ends  # the hand rose only once it was seen closed


def test_an_arm_that_never_rises_still_cycles_the_hand():
    """The top is held only so long: the hand opens again and the next cycle comes (the trigger then sees no lift)."""
    chunker, processor = SweepChunker(CONFIG), ActionProcessor(CONFIG)
    gripper, commands = 0.0, []
    for _ in range(120):  # the request always shows the arm at the ready pose, the hand as last commanded
        executed = processor.check_chunk(chunker.chunk(request(gripper=gripper)))
        commands += [float(g) for g in executed[:, 7]]
        gripper = commands[-1]
    opens = sum(1 for a, b in zip(commands, commands[1:]) if a == 1.0 and b == 0.0)
    assert opens >= 2


def test_hold_chunks_keep_the_arm_in_place_inside_the_joint_limits():
    hold = joint_hold_chunk(CONFIG, request(gripper=1.0))
    assert hold.shape == (CONFIG.chunk_length, 8) and np.allclose(hold[:, :7], READY_JOINTS, atol=1e-6)
    assert np.all(hold[:, 7] == 1.0)
    warm_up = joint_hold_chunk(CONFIG, request(joints=np.zeros(7)))  # the warm-up's zero state: clipped into limits
    ActionProcessor(CONFIG).check_chunk(warm_up)
    with pytest.raises(InvalidInputError, match="observation/joint_position"):
        SweepChunker(CONFIG).chunk(request(joints=[0.0] * 6))


def test_the_server_answers_a_joint_position_policy_with_the_sweep_without_a_scene():
    slept = []
    policy = RehearsalPolicy(CONFIG, ExpertNoise.off(), delay_ms=0.0, wait_s=0.0, sleep=slept.append)
    assert policy.sweeps
    warm = policy.respond(request(joints=np.zeros(7), prompt=WARM_UP_PROMPT))["actions"]
    ActionProcessor(CONFIG).check_chunk(warm)
    held = policy.respond(request())["actions"]  # no episode runs: the arm is held where it is
    assert np.allclose(held[:, :7], READY_JOINTS, atol=1e-6) and policy.holds[NO_EPISODE] == 1
    task = load_suite(resolve_share_file("config/suites/tabletop.yaml")).task("kitchen_single_1")
    policy.set_episode("e1", task, 0)  # no privileged state ever comes: the sweep does not need one
    first, second = (policy.respond(request())["actions"] for _ in range(2))
    assert np.allclose(first[CONFIG.execute_steps:], second[:CONFIG.chunk_length - CONFIG.execute_steps])
    assert policy.stats()["chunks"] == 2 and policy.holds[NO_EPISODE] == 1
    with pytest.raises(LadderError):
        policy.respond({"prompt": "x", "observation/joint_position": np.zeros(3)})


def test_the_franka_rehearsal_plan_points_the_driver_and_the_policy_at_this_machine(tmp_path):
    from ladder_ros.evaluation.rehearsal import UNSCORED_TASKS, plan_rehearsal, rehearsed_robot, summarize

    plan = plan_rehearsal("franka", tmp_path, inference_delay_ms=400)
    params = plan.params
    robot = rehearsed_robot(params)
    assert (robot.twin, robot.driver, robot.scored) == ("franka_twin", "franka_driver", False)
    assert params["franka_driver"]["host"] == params["franka_twin"]["host"] == "127.0.0.1"
    assert params["franka_driver"]["realtime"] is False and params["franka_driver"]["model"] == "fr3"
    assert params["rehearsal_server"]["policy"] == params["policy"]["policy"]  # one copy, on a free port
    copy = load_policy(params["policy"]["policy"])
    assert copy.name == "droid_pi05_server" and copy.server.host == "127.0.0.1" and copy.server.port != 8000
    assert params["rehearsal_server"]["inference_delay_ms"] == 400.0
    assert {"camera", "wrist_camera"} <= {launch.name for launch in plan.launches}
    assert params["wrist_camera"]["backend"] == "fake" and params["orchestrator"]["variant"] == "proprio_trigger"
    assert UNSCORED_TASKS == "kitchen_single_1"
    # Unscored records give no success rate (a rate over them would be a made-up zero), only their timing.
    record = {"variant": "proprio_trigger", "success": False, "subgoals_done": 0, "horizon": 1, "scored": False,
              "timing": None, "finish_reason": "plan_exhausted"}
    summary = summarize([record])
    assert summary["scored"] is False and summary["success"] == {}


def run_lossy_node(steps: int, seed: int, drop_p: float, lose_p: float, arm_gain: float, hand_lag_steps: int = 6):
    """The sweep behind a model of the policy node's queue (ladder_ros/policies/executor.py): a request goes out
    when fewer than ``lead`` rows are queued and its chunk arrives 1-3 steps later; the chunk's seam is checked
    against the last row queued, or, after the queue ran dry or was dropped, against the joints of the
    observation it was computed from (``ChunkScreen.check_seam``); a refused chunk is not queued. With
    probability ``drop_p`` a step finds the observation stale: the queue is dropped and the arm holds; with
    probability ``lose_p`` a chunk is lost (refused for another reason). Returns the seam jumps refused, the arm's
    joints and the hand as seen, per step."""
    rng = np.random.default_rng(seed)
    chunker, processor = SweepChunker(CONFIG), ActionProcessor(CONFIG)
    bound = CONFIG.seam.max_joint_rad
    queue, previous, pending = [], None, None  # pending: (arrival step, rows, joints the request showed)
    arm, commanded, refused = np.array(READY_JOINTS), [0.0], []
    arms, hand = [], []
    for step in range(steps):
        seen = commanded[max(0, len(commanded) - 1 - hand_lag_steps)]
        if pending is not None and pending[0] <= step:
            _, rows, shown = pending
            pending = None
            reference = queue[-1][:7] if queue else (previous if previous is not None else shown)
            jump = float(np.max(np.abs(rows[0, :7] - reference)))
            if jump > bound:
                refused.append(jump)
            elif rng.random() >= lose_p:
                queue.extend(rows[:CONFIG.execute_steps])
        if rng.random() < drop_p:
            queue, previous = [], None
        elif queue:
            row = queue.pop(0)
            previous = np.asarray(row[:7], dtype=np.float64)
            commanded.append(float(row[7]))
            arm = arm + arm_gain * (previous - arm)
        else:
            previous = None
        if pending is None and len(queue) < int(rng.integers(1, CONFIG.execute_steps + 1)):
            rows = processor.check_chunk(chunker.chunk(request(arm, gripper=seen)))
            pending = (step + int(rng.integers(1, 4)), rows, arm.copy())
        arms.append(arm.copy())
        hand.append(seen)
    return refused, np.array(arms), np.array(hand), chunker


@pytest.mark.parametrize("seed, drop_p, lose_p, arm_gain", [(0, 0.03, 0.0, 1.0), (1, 0.0, 0.05, 1.0),
                                                            (2, 0.03, 0.03, 0.5), (3, 0.08, 0.05, 0.3),
                                                            (4, 0.02, 0.1, 0.15)])
def test_a_node_that_drops_its_queue_or_loses_chunks_never_sees_a_seam_jump(seed, drop_p, lose_p, arm_gain):
    """Rows the node never executed are not counted as done: the next chunk starts where its seam check
    measures from, and every cycle is still an attempt the Franka trigger ends on the release."""
    from ladder_ros.core.triggers import GripperTrigger

    refused, arm, hand, chunker = run_lossy_node(3000, seed, drop_p, lose_p, arm_gain)
    assert refused == []
    assert chunker.resyncs > 0  # rows were lost and the script took its place from the arm
    trigger = GripperTrigger(get_preset("franka").trigger)
    ends = [e for step, (joints, closed) in enumerate(zip(arm, hand))
            if (e := trigger.update(step, 1.0 - closed, forward_kinematics(joints)[2, 3])) is not None]
    assert len(ends) >= 5 and all(e.reason == "release" for e in ends), ends


def test_without_taking_its_place_from_the_arm_the_sweep_jumps_after_lost_rows(monkeypatch):
    """The control: a sweep that only counts chunks (never re-anchors) has its chunks refused by the seam check."""
    import ladder_ros.instruments.rehearsal.sweep as sweep

    monkeypatch.setattr(sweep, "RESYNC_FRACTION", float("inf"))
    refused, *_ = run_lossy_node(3000, 3, 0.08, 0.05, 0.3)
    assert len(refused) > 10
