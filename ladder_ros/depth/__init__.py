"""Metric depth aligned to a colour image, without ROS: estimators (MoGe-2, Depth Anything V2), a
newest-frame-wins worker thread, and error metrics against a reference depth."""
