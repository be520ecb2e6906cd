"""The scripted expert: a privileged-state pick-and-place policy used as a stand-in for a learned one."""
