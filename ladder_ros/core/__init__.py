"""The orchestrator algorithm, free of ROS: tasks, triggers, verification, queue, variants, metrics.

Nothing in this package imports rclpy; nodes and the in-process reference loop call it alike.
"""
