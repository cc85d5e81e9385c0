"""Where tests/trainables/cycles.py leaves its weak references (planner loads a trainable afresh
per trial)."""

LEFT: list = []
