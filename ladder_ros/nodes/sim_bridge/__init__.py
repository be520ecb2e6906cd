"""The sim bridge node: a simulator behind the robot's topics (observations out, actions in), with the
episode's scoring from the simulator's privileged state."""
