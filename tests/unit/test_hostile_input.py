"""Hostile or broken files: each a clear, coded error, quickly, with no traceback and nothing
executed."""

from __future__ import annotations

import pytest

from planner._cli.main import main
from planner._contract.load import MAX_BYTES, MAX_DEPTH
from planner._contract.validate import validate
from tests._scaling import peak_bytes

BOMB = """\
a: &a ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]
b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]
c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]
d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c]
e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d]
f: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e]
g: &g [*f, *f, *f, *f, *f, *f, *f, *f, *f]
h: &h [*g, *g, *g, *g, *g, *g, *g, *g, *g]
i: &i [*h, *h, *h, *h, *h, *h, *h, *h, *h]
"""

# name -> (file bytes, code, exit code, 1-based line or None)
CASES = {
    "python-apply-tag": (
        b"version: !!python/object/apply:os.system ['touch {marker}']\n",
        "P005",
        1,
        1,
    ),
    "python-name-tag": (b"version: 1\nname: !!python/name:os.system\n", "P005", 1, 2),
    "python-new-tag": (
        b"version: 1\nname: !!python/object/new:os.system [touch {marker}]\n",
        "P005",
        1,
        2,
    ),
    "custom-tag": (b"version: 1\nname: !include other.yaml\n", "P005", 1, 2),
    "alias-bomb": (BOMB.encode(), "P006", 1, None),
    "too-many-aliases": (b"a: &a 1\nb: [" + b", ".join([b"*a"] * 200) + b"]\n", "P006", 1, 2),
    "recursive-alias": (b"a: &a [1, *a]\n", "P006", 1, 1),
    "deep-flow-nesting": (b"a: " + b"[" * 1000 + b"]" * 1000 + b"\n", "P007", 1, 1),
    "deep-block-nesting": (
        "".join(f"{'  ' * i}k{i}:\n" for i in range(1000)).encode() + b"  " * 1000 + b"x: 1\n",
        "P007",
        1,
        None,
    ),
    "duplicate-key": (b"version: 1\nname: a\nname: b\n", "P008", 1, 3),
    "empty-file": (b"", "P009", 1, 1),
    "only-comments": (b"# nothing here\n", "P009", 1, 1),
    "top-level-list": (b"- version: 1\n- name: x\n", "P009", 1, 1),
    "top-level-scalar": (b"just a sentence\n", "P009", 1, 1),
    "two-documents": (b"version: 1\n---\nversion: 1\n", "P010", 1, 2),
    "yaml-syntax": (b"version: 1\nname: [unclosed\nseeds: 2\n", "P004", 1, 3),
    "tab-indentation": (b"version: 1\nbudget:\n\texposure: 1\n", "P004", 1, 3),
    "merge-key": (b"a: &a {x: 1}\nb: {<<: *a}\n", "P011", 1, 2),
    "mapping-as-key": (b"? [1, 2]\n: 3\n", "P011", 1, 1),
    "binary-garbage": (bytes(range(256)) * 64, "P003", 2, None),
    "not-utf8": ("version: 1\nname: caf\u00e9\n".encode("latin-1"), "P003", 2, 2),
    "control-character": (b"version: 1\nname: a\x07b\n", "P003", 2, None),
    "a-million-values": (b"seeds: [" + b"1, " * 300_000 + b"1]\n", "P012", 1, 1),
    "huge-integer": (b"version: 1" + b"0" * 5000 + b"\n", "P004", 1, 1),
}


@pytest.fixture(params=["libyaml", "pure-python"])
def yaml_parser(request, monkeypatch):
    """Both ways the loader parses: libyaml's C parser when PyYAML has it, and pure Python."""
    import yaml

    if request.param == "libyaml" and not yaml.__with_libyaml__:
        pytest.skip("PyYAML is built without libyaml")
    if request.param == "pure-python":
        monkeypatch.setattr(yaml, "__with_libyaml__", False)
    return request.param


@pytest.mark.parametrize("name", sorted(CASES))
def test_hostile_file_is_a_clear_error(tmp_path, name, capsys, yaml_parser):
    data, code, exit_code, line = CASES[name]
    marker = tmp_path / "EXECUTED"
    path = tmp_path / "contract.yaml"
    path.write_bytes(data.replace(b"{marker}", str(marker).encode()))
    results = []
    peak = peak_bytes(lambda: results.append(validate(path)))
    (result,) = results
    assert [d.code for d in result.diagnostics] == [code], [d.format() for d in result.diagnostics]
    assert result.exit_code == exit_code
    if line is not None:
        assert result.diagnostics[0].line == line
    if code == "P007":
        assert result.diagnostics[0].line >= min(MAX_DEPTH - 1, data.count(b"\n"))
    assert result.diagnostics[0].hint
    # an expansion (aliases, deep nesting, long numbers) refused before it is built
    assert peak < 64 * 2**20, f"{name} held {peak / 2**20:.0f} MiB"
    assert not marker.exists(), "a YAML tag ran code"
    assert main(["validate", str(path)]) == exit_code
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    assert f"error {code}:" in out + err


def test_a_50_mb_file_is_refused_without_reading_it(tmp_path):
    path = tmp_path / "big.yaml"
    with open(path, "wb") as handle:
        handle.write(b"version: 1\nname: big\n# " + b"x" * 1000 + b"\n")
        handle.truncate(50 * 1024 * 1024)
    results = []
    assert peak_bytes(lambda: results.append(validate(path))) < 4 * 2**20, "the file was read"
    (result,) = results
    (d,) = result.diagnostics
    assert d.code == "P002" and result.exit_code == 2
    assert f"{50 * 1024 * 1024:,}" in d.message and f"{MAX_BYTES:,}" in d.message


@pytest.mark.parametrize("kind", ["missing", "folder"])
def test_a_path_that_is_not_a_readable_file_is_exit_2(tmp_path, kind, capsys):
    path = tmp_path / "nope.yaml" if kind == "missing" else tmp_path
    result = validate(path)
    assert [d.code for d in result.diagnostics] == ["P001"]
    assert main(["validate", str(path)]) == 2
    out, err = capsys.readouterr()
    assert out == "" and f"{path}: error P001:" in err


def test_nothing_is_left_on_the_import_path(tmp_path):
    import sys

    from tests._contract_helpers import edited, write_contract

    before_path, before_modules = list(sys.path), set(sys.modules)
    result = validate(write_contract(tmp_path, edited("hydra.yaml", [])))
    assert result.valid
    assert sys.path == before_path
    assert "fixture_trainable" not in sys.modules
    assert not {m for m in set(sys.modules) - before_modules if m.startswith("fixture_")}
