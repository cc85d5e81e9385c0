"""The one way planner defers an import: a module object that imports on first use (Optuna's
`_LazyImport`).

Imports sit at the top of every module. Where importing a library at the top would
make a light command heavy (`import planner`, `plan validate`, `plan status` never load
Ray, Optuna, pandas, MLflow, torch or SciPy), the module names it here instead:

    special = lazy_import("scipy.special")     # at the top of the module
    ...
    special.betainc(a, b, x)                   # SciPy is imported here, on first use

`lazy_import` returns at once; the real import happens on the first attribute read,
and from then on the lazy module reads through to the real one. The layering test
(tests/unit/test_layering.py) reads `lazy_import("...")` calls as imports, so a
deferred import obeys the same stage ranks and library boundaries as any other.

A leaf: imports nothing of planner's.
"""

from __future__ import annotations

import importlib
import types
from typing import Any


class LazyModule(types.ModuleType):
    """A stand-in for module `name`, imported on the first attribute read."""

    def __init__(self, name: str):
        super().__init__(name)
        self._lazy_name = name

    def _load(self) -> types.ModuleType:
        module = importlib.import_module(self._lazy_name)
        self.__dict__.update(module.__dict__)
        return module

    def __getattr__(self, item: str) -> Any:
        return getattr(self._load(), item)


def lazy_import(name: str) -> Any:
    """Module `name`, imported when one of its attributes is first read (see the module's text)."""
    return LazyModule(name)
