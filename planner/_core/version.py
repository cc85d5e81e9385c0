"""The planner version: one place, read by the package, the run identity and the frozen contract."""

VERSION = "0.1.0"
