"""Property: however a valid contract is mangled, `validate` answers with Diagnostics, never a
traceback."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from planner._contract.validate import ValidationResult, validate
from tests._contract_helpers import FIXTURES, write_contract

CODE = re.compile(r"^P\d{3}$")

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.dates(),
    st.binary(max_size=4),
    st.integers(-(10**6), 10**6),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
    st.sampled_from(
        [
            "",
            "0",
            "-1",
            "1e9",
            "${x}",
            "${oc.env:HOME}",
            "???",
            "a=b",
            "~x",
            "x:y",
            "a\x00b",
            "x" * 5000,
            "optimizer=adam",
            "a/b=c",
            "model.width=1",
            "!!python/name:os.system",
        ]
    ),
)
values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=6,
)


def _paths(node, prefix=()):
    yield prefix
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _paths(value, (*prefix, key))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _paths(value, (*prefix, i))


def _get(node, path):
    for part in path:
        node = node[part]
    return node


@st.composite
def mutated(draw, base):
    data = yaml.safe_load(base)
    for _ in range(draw(st.integers(1, 3))):
        paths = [p for p in _paths(data) if p]
        if not paths:
            break
        path = draw(st.sampled_from(paths))
        parent, leaf = _get(data, path[:-1]), path[-1]
        action = draw(st.sampled_from(["delete", "rename", "replace", "swap", "insert"]))
        if action == "delete":
            del parent[leaf]
        elif action == "rename" and isinstance(parent, dict):
            parent[
                draw(st.text(min_size=1, max_size=10))
                if draw(st.booleans())
                else str(leaf)[:-1] or "x"
            ] = parent.pop(leaf)
        elif action == "replace":
            parent[leaf] = draw(values)
        elif action == "swap":
            other = draw(st.sampled_from(paths))
            try:
                other_parent = _get(data, other[:-1])
                parent[leaf], other_parent[other[-1]] = other_parent[other[-1]], parent[leaf]
            except (KeyError, IndexError, TypeError):
                pass
        elif action == "insert" and isinstance(parent, dict):
            parent[draw(st.text(min_size=1, max_size=10))] = draw(values)
    return yaml.safe_dump(data, allow_unicode=True)


@st.composite
def text_edited(draw, base):
    text = base
    for _ in range(draw(st.integers(1, 4))):
        at = draw(st.integers(0, len(text)))
        if draw(st.booleans()):
            text = (
                text[:at]
                + draw(st.sampled_from(list(":-[]{}&*!#'\"\n\t |>%@`,?") + ["  ", "\x00", "é"]))
                + text[at:]
            )
        else:
            text = text[:at] + text[at + draw(st.integers(1, 5)) :]
    return text


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("fuzz")


def _assert_answered(folder: Path, text: str) -> None:
    path = write_contract(folder, text)
    result = validate(path)  # must not raise
    assert isinstance(result, ValidationResult)
    assert result.valid or [d for d in result.diagnostics if d.severity == "error"]
    for d in result.diagnostics:
        assert CODE.match(d.code), d
        assert d.line >= 0 and d.message


def fuzz(examples: int) -> settings:
    return settings(
        max_examples=examples,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    )


INLINE = (FIXTURES / "inline.yaml").read_text()
HYDRA = (FIXTURES / "hydra.yaml").read_text()


@fuzz(80)
@given(text=mutated(INLINE))
def test_mutated_inline_contracts_never_crash(folder, text):
    _assert_answered(folder, text)


@fuzz(25)
@given(text=mutated(HYDRA))
def test_mutated_hydra_contracts_never_crash(folder, text):
    _assert_answered(folder, text)


@fuzz(60)
@given(text=text_edited(INLINE))
def test_edited_yaml_text_never_crashes(folder, text):
    _assert_answered(folder, text)
