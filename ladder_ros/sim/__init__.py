"""Simulator backends behind one interface: the built-in MuJoCo tabletop and SimplerEnv (ManiSkill3)."""
