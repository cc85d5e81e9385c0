"""The one module that holds Ray's and Optuna's private names: it refuses a Ray or Optuna outside
the range it was written for, or a Ray without a name planner needs, with one sentence; and the
installed Ray has every name it lists (a Ray that moved one fails here, not silently in a run)."""

from __future__ import annotations

import importlib.metadata

import pytest

from planner import RunError
from planner._dispatch import compat
from planner._dispatch.compat import NEEDED, PrivateName


def test_a_version_outside_the_range_is_one_sentence_naming_the_package_and_its_version():
    assert compat.version_problem("ray", "2.40.0") == (
        "ray 2.40.0 is installed, but planner supports ray>=2.41,<3 (install a version in that "
        "range, e.g. pip install 'ray>=2.41,<3')"
    )
    assert compat.version_problem("optuna", "6.0.0") is not None
    assert compat.version_problem("optuna", "3.6.1") is not None


def test_the_installed_versions_and_their_prereleases_are_in_the_range():
    for package in ("ray", "optuna"):
        installed = importlib.metadata.version(package)
        assert compat.version_problem(package, installed) is None
        assert compat.version_problem(package, installed + "rc1") is None


def test_a_needed_name_the_installed_ray_lacks_is_refused_with_one_sentence(monkeypatch):
    absent = PrivateName("ray", "ray._private.worker", "_no_such_node", NEEDED)
    monkeypatch.setattr(compat, "PRIVATE_NAMES", (*compat.PRIVATE_NAMES, absent))
    version = importlib.metadata.version("ray")
    with pytest.raises(RunError) as raised:
        compat.check_installed()
    assert str(raised.value) == (
        f"ray {version} has no ray._private.worker._no_such_node, which planner needs; install "
        "ray>=2.41,<3 at a version planner was tested with"
    )


def test_a_module_the_installed_ray_lacks_is_a_missing_name_too():
    absent = PrivateName("ray", "ray._private.no_such_module", "", NEEDED)
    assert compat.lookup(absent) is compat.ABSENT
    assert "has no ray._private.no_such_module," in compat.missing_sentence(absent)


def test_the_installed_ray_and_optuna_have_every_private_name_listed():
    """Every name where Ray is at least the version the speed patches were written for; every needed
    name on any Ray in the range (an older one runs without the speed patches it lacks)."""
    missing = [name for name in compat.missing() if name.package == "ray"]
    if compat.version_tuple(importlib.metadata.version("ray")) >= compat.SPEED_WRITTEN_FOR:
        assert [name.dotted for name in missing] == []
    assert [name.dotted for name in missing if name.kind == NEEDED] == []
