"""ladder_ros: the LADDER orchestrator loop for real robots, ROS 2 graphs and simulators."""

__version__ = "0.1.0"
