"""franky-sim behind the Franka driver: its server on loopback and the node that runs it on the wall clock."""
