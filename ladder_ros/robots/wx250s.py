"""The WidowX 250 6-DoF (Interbotix ``wx250s``): kinematics, limits, poses and gripper range, with sources.

* ``M`` and ``Slist``: Interbotix's Modern Robotics description of the wx250s
  (interbotix_xs_modules, ``xs_robot/mr_descriptions.py``, class ``wx250s``): the
  ``ee_gripper_link`` in ``base_link`` at all joints zero, and the joints' screw axes in the base frame.
* Joint limits: interbotix_xsarm_descriptions ``urdf/wx250s.urdf.xacro`` (waist, forearm roll and
  wrist rotate +-(pi - 1e-5); shoulder -108..114 deg; elbow -123..92 deg; wrist angle -100..123 deg;
  every joint pi rad/s).
* Neutral (home) joints: bridge_data_robot ``widowx_controller.py`` ``NEUTRAL_JOINT_STATE``, the
  pose the BridgeData v2 collection resets to.
* Sleep joints: interbotix_xsarm_control ``config/wx250s.yaml`` ``sleep_positions``.
* Motors: Trossen's servo table of the WidowX 250 (TrossenRobotics/interbotix_xsarms_docs, commit
  d50a76f53f803d5e1a833f8035b743286671ae0c, ``_data/servos_wx250.csv``): XM430-W350 for the waist, shoulder,
  elbow (each of those two with a shadow) and wrist angle, XL430-W250 for wrist rotate and the gripper. The 6-DoF
  arm's forearm roll, which that table does not list, is taken to be an XM430-W350 like the joints around it.
* Finger range for the aperture: bridge_data_robot ``custom_gripper_controller.py`` normalises the
  left finger position between 0.010 m (closed) and 0.035 m (open); the URDF's finger joint range is
  0.015..0.037 m.
"""

from __future__ import annotations

import math

import numpy as np

from ladder_ros.core.safety import JointLimits
from ladder_ros.robots.kinematics import ScrewChain

MODEL = "wx250s"
JOINT_NAMES = ("waist", "shoulder", "elbow", "forearm_roll", "wrist_angle", "wrist_rotate")

SLIST = np.array([[0.0, 0.0, 1.0, 0.0, 0.0, 0.0],
                  [0.0, 1.0, 0.0, -0.11065, 0.0, 0.0],
                  [0.0, 1.0, 0.0, -0.36065, 0.0, 0.04975],
                  [1.0, 0.0, 0.0, 0.0, 0.36065, 0.0],
                  [0.0, 1.0, 0.0, -0.36065, 0.0, 0.29975],
                  [1.0, 0.0, 0.0, 0.0, 0.36065, 0.0]]).T
M = np.array([[1.0, 0.0, 0.0, 0.458325],
              [0.0, 1.0, 0.0, 0.0],
              [0.0, 0.0, 1.0, 0.36065],
              [0.0, 0.0, 0.0, 1.0]])

_PI = math.pi - 1e-5
LOWER = (-_PI, math.radians(-108), math.radians(-123), -_PI, math.radians(-100), -_PI)
UPPER = (_PI, math.radians(114), math.radians(92), _PI, math.radians(123), _PI)
VELOCITY_LIMIT_RAD_S = math.pi  # every arm joint (URDF)
CONTROL_PERIOD_S = 0.2  # 5 Hz (paper Appendix A)

NEUTRAL_JOINTS = (-0.13192235, -0.76238847, 0.44485444, -0.01994175, 1.7564081, -0.15953401)
SLEEP_JOINTS = (0.0, -1.80, 1.55, 0.0, 0.8, 0.0)
MOTOR_MODELS = ("XM430-W350",) * 5 + ("XL430-W250",)  # per arm joint (module docstring)
FINGER_CLOSED_M = 0.010
FINGER_OPEN_M = 0.035


def joint_limits(period_s: float = CONTROL_PERIOD_S) -> JointLimits:
    """The wx250s limits; a joint may move at most its velocity limit times one control period per step."""
    step = VELOCITY_LIMIT_RAD_S * period_s
    return JointLimits(JOINT_NAMES, LOWER, UPPER, (step,) * len(JOINT_NAMES),
                       source="interbotix_xsarm_descriptions wx250s.urdf.xacro (limits, pi rad/s) over one "
                              "control period")


def chain(period_s: float = CONTROL_PERIOD_S) -> ScrewChain:
    return ScrewChain(MODEL, M, SLIST, joint_limits(period_s))
