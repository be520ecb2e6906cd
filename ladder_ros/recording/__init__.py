"""Episode recordings (rosbag2, MCAP storage): writing, reading and recovering them. No rclpy here."""
