"""Cameras without ROS: frames, intrinsics and extrinsics, capture backends, calibration files, ChArUco
calibration (charuco, hand_eye) and the check that a calibration still holds (drift)."""
