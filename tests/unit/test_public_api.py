"""The public API is what docs/api.md documents, and the docs name nothing private.

- every `planner.X` / `planner.stats.X` heading of docs/api.md imports, and the
  headings are exactly `planner.__all__` and `planner.stats.__all__`;
- each public name reports `planner` (or `planner.stats`) as its module, as httpx does;
- no user doc (docs/*.md, README.md) names a private module or a path outside
  this repository; docs/architecture.md, for contributors, may name private modules.
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

import planner
import planner.stats

REPO = Path(__file__).resolve().parents[2]
API = REPO / "docs" / "api.md"
USER_DOCS = sorted((REPO / "docs").glob("*.md")) + [
    REPO / "README.md",
    REPO / "examples" / "contracts" / "README.md",
]
CONTRIBUTOR_DOCS = {"architecture.md"}
HEADING = re.compile(r"^#{2,4} `(planner(?:\.stats)?)\.(\w+)`\s*$", re.MULTILINE)


def _documented() -> dict[str, set[str]]:
    found: dict[str, set[str]] = {"planner": set(), "planner.stats": set()}
    for module, name in HEADING.findall(API.read_text()):
        found[module].add(name)
    return found


def test_all_is_the_eager_names_and_the_lazy_table():
    eager = {
        "__version__",
        "ContractError",
        "PlannerError",
        "RunError",
        "RunLockedError",
        "TrialProtocolError",
        "UsageError",
    }
    assert set(planner.__all__) == eager | set(planner._LAZY) | {"stats"}
    assert len(planner.__all__) == len(set(planner.__all__))


def test_api_md_documents_exactly_the_public_names():
    documented = _documented()
    assert documented["planner"] == set(planner.__all__) - {"stats"}, (
        "docs/api.md and planner.__all__ differ: "
        f"undocumented {sorted(set(planner.__all__) - {'stats'} - documented['planner'])}, "
        f"not public {sorted(documented['planner'] - set(planner.__all__))}"
    )
    assert documented["planner.stats"] == set(planner.stats.__all__)


@pytest.mark.parametrize(
    "module,name",
    sorted((module, name) for module, names in _documented().items() for name in names),
)
def test_every_documented_name_imports(module, name):
    value = getattr(importlib.import_module(module), name)
    assert value is not None
    namespace: dict = {}
    exec(f"from {module} import {name}", namespace)  # the import statement the docs show works too
    assert namespace[name] is value


@pytest.mark.parametrize("module", ["planner", "planner.stats"])
def test_public_names_belong_to_the_public_module(module):
    mod = importlib.import_module(module)
    for name in mod.__all__:
        value = getattr(mod, name)
        if (
            name == "prepare_reeval"
        ):  # an alias keeps its own name, `prepare`, so it pickles by reference
            continue
        if callable(value) and hasattr(value, "__module__"):
            assert value.__module__ == module, f"{module}.{name}.__module__ is {value.__module__!r}"


def test_public_names_pickle_by_their_public_path():
    import pickle

    for name in ("ContractError", "RunResult", "load_run", "CommandTrainable"):
        value = getattr(planner, name)
        assert pickle.loads(pickle.dumps(value)) is value
    assert pickle.loads(pickle.dumps(planner.stats.Comparison)) is planner.stats.Comparison


def test_unknown_attribute_is_an_attribute_error():
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        planner.nope  # noqa: B018
    assert "load_run" in dir(planner)


def _lines(pattern: re.Pattern, exempt: set[str]) -> list[str]:
    hits = []
    for doc in USER_DOCS:
        if doc.name in exempt and doc.parent.name == "docs":
            continue
        for number, line in enumerate(doc.read_text().splitlines(), 1):
            if pattern.search(line):
                hits.append(f"{doc.relative_to(REPO)}:{number}: {line.strip()}")
    return hits


def test_user_docs_name_no_private_module():
    hits = _lines(re.compile(r"planner[./]_[a-z]"), CONTRIBUTOR_DOCS)
    assert not hits, (
        "user docs name private modules (use the public names of docs/api.md):\n" + "\n".join(hits)
    )


def test_docs_point_at_nothing_outside_the_repository():
    hits = _lines(re.compile(r"(?<![\w.-])shared/"), set())
    assert not hits, (
        "docs point outside this repository (examples ship in examples/):\n" + "\n".join(hits)
    )
