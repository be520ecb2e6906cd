"""The robot drivers: the only nodes that move a real arm, and the last safety filter between a policy and the motors.

``widowx_driver`` (:mod:`.widowx`) drives a WidowX 250 through Interbotix's Python API from Bridge end-effector
deltas at 5 Hz; ``franka_driver`` (:mod:`.franka`) drives a Franka Panda or FR3 through franky from joint-position
targets at 15 Hz. In simulation the sim bridge stands where a driver stands, on the same topics.

A driver owns the connection to the arm's API (every call that can block runs off the node's thread with a
deadline), the safety supervisor (dry run until armed, a latched e-stop, the watchdog, a hold while the
orchestrator verifies, faults that need a confirmed recovery before the robot can be armed again) and the episode's
count of safety interventions. Nothing else in the graph commands the arm.

Topics (:mod:`ladder_ros.specs.topics`): subscribes ``policy/action`` (``ACTION``, applied only from the node named
by ``action_source``) and ``episode/status`` (``EPISODE_STATUS``); publishes ``joint_states`` (``JOINT_STATES``),
``ee_pose`` (``EE_POSE``), ``robot/joint_command`` (``JOINT_COMMAND``), ``safety/interventions`` (``SAFETY``),
``robot/safety_state`` (``SAFETY_STATE``, latched) and ``/diagnostics`` (``DIAGNOSTICS``).
Services: ``robot/arm`` (``ARM_SERVICE``, std_srvs/SetBool), ``robot/estop``, ``robot/estop_release``,
``robot/home`` and ``robot/recover`` (``ESTOP_SERVICE``, ``ESTOP_RELEASE_SERVICE``, ``HOME_SERVICE``,
``RECOVER_SERVICE``; std_srvs/Trigger).

Parameters (:mod:`ladder_ros.specs.robot_parameters`): both drivers read ``ROBOT_DRIVER``'s (preset: the control
rate and action limits; clock_mode: wall_clock only; base_frame, aperture_joint, action_source, max_action_age_s,
future_tolerance_s, watchdog_periods, hold_while_verifying, speed_scale, home_after_episode, connect_timeout_s,
vendor_call_timeout_s, recover_timeout_s, health_poll_s, max_state_age_s). ``WIDOWX_DRIVER`` adds the Interbotix
connection (interbotix_api, twin_xs_sdk, robot_model, robot_name), the motion profile (moving_time_s, accel_time_s),
the gripper (gripper_pressure, finger_closed_m, finger_open_m, gripper_timeout_s), the workspace box and home
(workspace_low, workspace_high, home_joints), ik_max_iterations and the stall checks (by tracking:
tracking_tolerance_rad, command_latency_s, stall_readings; by the motors' effort: stall_effort_ma, stall_lag_rad,
stall_confirm_s). ``FRANKA_DRIVER`` adds the arm (host, model, joint_names, ready_joints,
realtime, max_joint_velocity), the Franka Hand (gripper_speed_m_s, gripper_force_n, max_width_m) and the workspace
box (workspace_low, workspace_high).

:mod:`.node` holds :class:`~ladder_ros.nodes.driver.node.RobotDriverNode`, the base both drivers share, and names
the objects it composes.
"""
