"""Loading: plain data with the 1-based line and column of every node and key."""

from __future__ import annotations

import pytest

from planner import ContractError, UsageError
from planner._contract.load import format_path, load_yaml, parse_yaml
from planner._core.errors import ContractFileError

TEXT = """\
# a comment
name: demo
arms:
  - name: a
    overrides: [x=1, "y=2"]
tuning:
  space:
    optimizer.lr: {log_uniform: [0.001, 0.1]}
when: 2024-01-01
"""


def test_data_is_plain():
    loaded = parse_yaml(TEXT)
    assert loaded.data["arms"] == [{"name": "a", "overrides": ["x=1", "y=2"]}]
    assert loaded.data["tuning"]["space"] == {"optimizer.lr": {"log_uniform": [0.001, 0.1]}}


@pytest.mark.parametrize(
    ("path", "key", "expected"),
    [
        (("name",), False, (2, 7)),
        (("name",), True, (2, 1)),
        (("arms", 0), False, (4, 5)),
        (("arms", 0, "overrides", 1), False, (5, 22)),
        (("tuning", "space", "optimizer.lr"), True, (8, 5)),
        (("tuning", "space", "optimizer.lr", "log_uniform", 1), False, (8, 41)),
        (("tuning",), False, (6, 1)),  # a block mapping: its key, not its first child
        (("arms", 0, "missing"), False, (4, 5)),  # a missing key: its parent
        (("budget", "exposure"), False, (2, 1)),  # nothing of it exists: the top mapping
    ],
)
def test_positions(path, key, expected):
    assert parse_yaml(TEXT).position(path, key=key) == expected


def test_format_path_quotes_dotted_keys():
    assert (
        format_path(("tuning", "space", "optimizer.lr", "log_uniform", 0))
        == 'tuning.space["optimizer.lr"].log_uniform.0'
    )
    assert format_path(()) == ""


def test_aliases_within_limits_are_expanded():
    loaded = parse_yaml("a: &x [1, 2]\nb: *x\n")
    assert loaded.data == {"a": [1, 2], "b": [1, 2]}


def test_a_file_error_is_both_a_contract_and_a_usage_error(tmp_path):
    with pytest.raises(ContractFileError) as caught:
        load_yaml(tmp_path / "absent.yaml")
    assert isinstance(caught.value, ContractError) and isinstance(caught.value, UsageError)
    assert caught.value.exit_code == 2
    assert caught.value.diagnostics[0].code == "P001"


def test_utf8_with_a_byte_order_mark_is_read(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_bytes("\ufeffname: caf\u00e9\n".encode())
    assert load_yaml(path).data == {"name": "caf\u00e9"}


def test_a_fifo_named_as_the_contract_is_refused_not_waited_on(tmp_path):
    """`open()` on a FIFO blocks until a writer comes: `plan validate pipe.yaml` hung for good."""
    import os
    import signal

    from planner._contract.validate import validate

    def hung(*_):
        raise AssertionError("validate waited on the FIFO")

    pipe = tmp_path / "contract.yaml"
    os.mkfifo(pipe)
    before = signal.signal(signal.SIGALRM, hung)
    signal.alarm(30)
    try:
        result = validate(pipe)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, before)
    assert result.exit_code == 2 and [d.code for d in result.diagnostics] == ["P001"]
    assert "not a regular file" in result.diagnostics[0].message
