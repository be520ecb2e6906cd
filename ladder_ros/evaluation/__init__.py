"""Running episodes: the in-process reference loop, sim-eval, trigger replay and reports."""
