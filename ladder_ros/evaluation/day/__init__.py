"""The evaluation day: an evaluation plan run unattended, in randomised blocks, resumable after any stop.

``ladder-ros day PLAN --out DIR --sim|--rehearsal`` (docs/evaluation_day.md). The pure parts (the order, the
records, progress and budget, the disk guard, resource samples, the summary) import no rclpy; the graph
(:mod:`~ladder_ros.evaluation.day.graph`) imports it only when it starts.
"""
