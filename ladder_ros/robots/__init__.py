"""Robot drivers' pure parts: kinematics, the Bridge target pose, gripper normalisation, trajectory shaping,
control timing, and the vendor backends (Interbotix for the WidowX, franky for the Franka) behind small
interfaces. No rclpy here except inside the vendor APIs themselves; the nodes are ``ladder_ros.nodes.*_driver``.
"""
