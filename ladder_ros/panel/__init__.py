"""The operator panel (an rqt plugin, or a window of its own): episode control, success labels, evaluation
plans and blind A/B sessions, with the graph behind a small bridge."""
