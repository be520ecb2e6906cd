"""The twin's scene: the tabletop's gripper goes where the WidowX's motors put it, and the objects feel it.

The motors and the physics share a fake clock, so the test advances time in the physics' own
periods and the motion is the same every run. The arm is moved by writing goals to the motors, as
xs_sdk does when the driver commands the arm.
"""

import numpy as np
import pytest

pytest.importorskip("mujoco", reason="the twin's scene is the built-in MuJoCo tabletop")

from ladder_ros.core.rotations import euler_xyz_to_matrix  # noqa: E402
from ladder_ros.core.suite import load_suite  # noqa: E402
from ladder_ros.paths import resolve_share_file  # noqa: E402
from ladder_ros.robots import dynamixel as dxl  # noqa: E402
from ladder_ros.robots import wx250s  # noqa: E402
from ladder_ros.instruments.widowx_twin.motors import FINGER_LOWER_M, FINGER_UPPER_M, WidowXMotors  # noqa: E402
from ladder_ros.instruments.widowx_twin.world import (  # noqa: E402
    WIDOWX_TOP_DOWN,
    TwinWorld,
    finger_from_pad,
    pad_from_finger,
)


class FakeClock:
    def __init__(self):
        self.t = 1000.0

    def __call__(self):
        return self.t


@pytest.fixture
def scene():
    import threading

    clock = FakeClock()
    motors = WidowXMotors(clock, joints=wx250s.NEUTRAL_JOINTS, profile=dxl.ProfileRegisters(600, 200))
    suite = load_suite(resolve_share_file("config/suites/tabletop.yaml"))
    world = TwinWorld(suite, motors, threading.RLock(), image_size=64, clock=clock)
    world.reset(suite.task("kitchen_single_1"), 0, 0)
    yield clock, motors, world
    world.stop()


def run(clock, world, seconds):
    for _ in range(int(round(seconds / world.physics_period_s))):
        clock.t += world.physics_period_s
        world.advance()


def reach(motors, world, position, yaw):
    """Joint goals that put the gripper top-down at ``position`` with ``yaw``, through a few waypoints."""
    chain = wx250s.chain()
    q = np.array([m.goal if m.goal is not None else m.position for m in motors.arm.values()])
    start = chain.forward(q)[:3, 3]
    for fraction in np.linspace(0.2, 1.0, 5):
        target = np.eye(4)
        target[:3, :3] = euler_xyz_to_matrix(np.array([0.0, 0.0, yaw])) @ WIDOWX_TOP_DOWN
        target[:3, 3] = start + fraction * (np.asarray(position) - start)
        solved = chain.inverse(target, q, max_iterations=50)
        assert solved.success, solved.reason
        q = solved.joints
    motors.write_group("arm", list(q))


def test_the_finger_travels_map_end_to_end():
    assert pad_from_finger(FINGER_LOWER_M) == pytest.approx(0.010)
    assert pad_from_finger(FINGER_UPPER_M) == pytest.approx(0.035)
    assert finger_from_pad(pad_from_finger(0.02)) == pytest.approx(0.02)


def test_the_gripper_follows_the_arm_and_carries_what_the_finger_motor_closes_on(scene):
    clock, motors, world = scene
    tcp = world.tabletop.data.site_xpos[world.tabletop._built.tcp_site]
    home = wx250s.chain().forward(np.array(wx250s.NEUTRAL_JOINTS))[:3, 3]
    assert np.allclose(tcp, home, atol=1e-6)  # placed where the arm is at the reset
    carrot = next(p for p in world.privileged().objects.values() if p.kind == "carrot")
    w, x, y, z = carrot.quaternion
    yaw = float(np.arctan2(2 * (x * y + w * z), 1 - 2 * (y * y + z * z)))
    above = carrot.position + np.array([0.0, 0.0, 0.08])
    reach(motors, world, above, yaw)
    run(clock, world, 1.0)
    assert np.linalg.norm(tcp - above) < 0.005, (tcp, above)  # the servos track the motors' pose
    reach(motors, world, carrot.position, yaw)
    run(clock, world, 1.0)
    motors.write_single("gripper", -300.0)  # grasp(): a negative PWM
    run(clock, world, 1.5)
    # The pads stopped on the carrot: the finger motor reads the carrot's width, not its closed limit.
    assert motors.gripper.object_width_m is not None and world.blocked_fingers >= 1
    finger = motors.joint_states().position[7]
    assert FINGER_LOWER_M + 0.002 < finger < FINGER_UPPER_M
    assert world.privileged().grasped == (next(n for n, p in world.privileged().objects.items()
                                               if p.kind == "carrot"),)
    reach(motors, world, above, yaw)
    run(clock, world, 1.0)
    lifted = next(p for p in world.privileged().objects.values() if p.kind == "carrot")
    assert lifted.position[2] > carrot.position[2] + 0.06  # carried up with the gripper
    motors.write_single("gripper", 300.0)  # release()
    run(clock, world, 1.0)
    assert motors.gripper.object_width_m is None and world.privileged().grasped == ()
    assert world.skipped_s == 0.0


def test_a_gripper_stand_in_turned_away_from_the_arm_is_counted(scene):
    """The scene's gripper must sit where the arm holds it; time it is turned away (a hinge pushed and held) is
    counted, so a recording shows when the twin, not the policy, made a grasp fail."""
    clock, motors, world = scene
    run(clock, world, 0.5)
    assert world.turned_off_arm_s == 0.0 and world.turned_off_arm_max_rad < 0.05
    tabletop = world.tabletop
    model, data = tabletop.model, tabletop.data
    model.actuator_forcerange[model.actuator("act_yaw").id] = (-1e-6, 1e-6)  # the yaw hinge cannot turn back
    data.qpos[model.jnt_qposadr[model.joint("gantry_yaw").id]] += 1.0
    run(clock, world, 0.5)
    assert world.turned_off_arm_s == pytest.approx(0.5, abs=0.05)
    assert world.turned_off_arm_max_rad == pytest.approx(1.0, abs=0.05)
