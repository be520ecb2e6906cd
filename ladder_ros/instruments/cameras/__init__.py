"""Cameras for tests and rehearsal: a synthetic one, and the twin's rendered frames read from shared memory."""
