"""Cameras without ROS: frames, intrinsics and extrinsics, capture backends, calibration files and ChArUco calibration."""
