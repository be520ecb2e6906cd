"""Cameras without ROS: frames, intrinsics and extrinsics, capture backends, calibration files, ChArUco
calibration."""
