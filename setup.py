"""The one compiled part of planner: the reports' columns (planner/_store/_columns.c).

Everything else is in pyproject.toml. The extension is optional: where it cannot be built (no C compiler),
planner reads reports with its Python twin (planner/_store/schema.py), to the same result, only slower.
"""

from setuptools import Extension, setup

setup(ext_modules=[Extension("planner._store._columns", ["planner/_store/_columns.c"], optional=True)])
