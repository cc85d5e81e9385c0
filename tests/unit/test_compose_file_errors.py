"""A broken YAML file in the config tree: P206 names that file and its line, not only the
contract."""

from __future__ import annotations

import shutil

from planner._contract.validate import validate
from tests._contract_helpers import EXAMPLES


def test_p206_names_the_broken_config_file_and_its_line(tmp_path, monkeypatch):
    root = tmp_path / "contracts"
    shutil.copytree(EXAMPLES, root)
    (root / "conf" / "optimizer" / "sgd.yaml").write_text(
        "name: sgd\nlr: [0.1, 0.2\nmomentum: 0.9\n"
    )
    monkeypatch.chdir(root)
    result = validate(root / "valid" / "optimizer-tuned.yaml")
    p206 = [d for d in result.diagnostics if d.code == "P206"]
    assert p206, [d.format() for d in result.diagnostics]
    # the parser's own words: "expected ..." from PyYAML's Python parser (Hydra 1.3), "did not find
    # expected ..." from libyaml's (Hydra 1.4)
    assert "conf/optimizer/sgd.yaml:3:9: " in p206[0].message
    assert "expected ',' or ']'" in p206[0].message
    assert "while parsing a flow sequence" in p206[0].message
