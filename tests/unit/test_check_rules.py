"""Every rule: a contract that breaks it (the code, at the right line) and one that passes it."""

from __future__ import annotations

import pytest

from planner._contract.validate import validate
from tests._contract_helpers import edited, line_of, write_contract

# (id, fixture, edits, expected code, text on the line the diagnostic must point at)
FAILING = [
    ("unknown-key", "hydra.yaml", [("seeds:", "seed:")], "P100", "seed:"),
    ("unknown-nested-key", "hydra.yaml", [("  exposure: 10", "  exposur: 10")], "P100", "exposur:"),
    ("missing-key", "hydra.yaml", [("  mode: max\n", "")], "P101", "metric:"),
    ("wrong-type", "hydra.yaml", [("exposure: 10", "exposure: ten")], "P102", "exposure: ten"),
    (
        "wrong-type-for-a-union",
        "hydra.yaml",
        [("max_trials: 100", "max_trials: 100\n  max_wall_time: [1]")],
        "P102",
        "max_wall_time",
    ),
    (
        "bad-duration",
        "hydra.yaml",
        [("max_trials: 100", "max_trials: 100\n  max_wall_time: soon")],
        "P103",
        "max_wall_time",
    ),
    (
        "out-of-range",
        "hydra.yaml",
        [("min_effect: 0.01", "min_effect: 0.01\n  alpha: 0.7")],
        "P103",
        "alpha: 0.7",
    ),
    ("not-allowed-value", "hydra.yaml", [("mode: max", "mode: maximum")], "P103", "mode: maximum"),
    (
        "fields-clash",
        "hydra.yaml",
        [("  overrides: []", "  overrides: []\n  values: {a: 1}")],
        "P104",
        "config:",
    ),
    (
        "no-way-to-train",
        "hydra.yaml",
        [("trainable: fixture_trainable:train\n", "")],
        "P104",
        "version: 1",
    ),
    (
        "missing-config-dir",
        "hydra.yaml",
        [("dir: conf", "dir: ./nowhere")],
        "P200",
        "dir: ./nowhere",
    ),
    ("missing-config-name", "hydra.yaml", [("name: train", "name: trian")], "P201", "name: trian"),
    (
        "missing-group-option",
        "hydra.yaml",
        [("[optimizer=adam]", "[optimizer=adamw]")],
        "P202",
        "optimizer=adamw",
    ),
    (
        "override-does-not-parse",
        "hydra.yaml",
        [("[optimizer=adam]", "['optimizer.lr=[']")],
        "P203",
        "optimizer.lr=[",
    ),
    (
        "override-is-a-sweep",
        "hydra.yaml",
        [("[optimizer=adam]", "['optimizer=adam,sgd']")],
        "P203",
        "adam,sgd",
    ),
    ("config-dir-with-a-nul-byte", "hydra.yaml", [("dir: conf", 'dir: "co\\0nf"')], "P200", "dir:"),
    (
        "override-names-a-group-the-dir-lacks",
        "hydra.yaml",
        [("[optimizer=adam]", "[optimizer=adam, +hydra/launcher=basic]")],
        "P203",
        "hydra/launcher",
    ),
    (
        "group-override-hydra-refuses",
        "hydra.yaml",
        [("[optimizer=adam]", "[+optimizer=adam]")],
        "P206",
        "+optimizer=adam",
    ),
    (
        "override-indexes-a-list-by-name",
        "inline.yaml",
        [("model: {width: 64, depth: 2}", "model: []")],
        "P203",
        "[model.width=64]",
    ),
    (
        "config-value-omegaconf-cannot-hold",
        "inline.yaml",
        [("data: {batch_size: 32}", "data: {batch_size: 32, day: 2024-01-01}")],
        "P206",
        "config:",
    ),
    (
        "override-unknown-key",
        "hydra.yaml",
        [("[optimizer=adam]", "[optimizer=adam, optimizer.lrr=0.1]")],
        "P204",
        "lrr",
    ),
    (
        "override-calls-resolver",
        "hydra.yaml",
        [("  overrides: []", "  overrides: ['model.width=${oc.env:HOME}']")],
        "P205",
        "oc.env",
    ),
    (
        "config-does-not-resolve",
        "hydra.yaml",
        [("  overrides: []", "  overrides: ['+model.extra=${model.nope}']")],
        "P206",
        "config:",
    ),
    (
        "group-changes-a-second-key",
        "hydra.yaml",
        [
            ("keys: [optimizer]", "keys: [schedule.warmup_steps]"),
            ("[optimizer=sgd]", "[schedule=constant]"),
            ("[optimizer=adam]", "[schedule=warmup_cosine]"),
            (
                "    optimizer.lr: {log_uniform: [1.0e-4, 1.0e-1]}",
                "    optimizer.lr: {log_uniform: [1.0e-4, 1.0e-1]}",
            ),
        ],
        "P300",
        "schedule=warmup_cosine",
    ),
    (
        "baseline-changes-a-second-key",
        "hydra.yaml",
        [
            ("keys: [optimizer]", "keys: [optimizer.lr]"),
            ("[optimizer=sgd]", "[optimizer=adam]"),
            ("[optimizer=adam]", "[optimizer.lr=0.1]"),
        ],
        "P300",
        "  overrides: [optimizer=adam]",
    ),
    (
        "arm-same-as-baseline",
        "hydra.yaml",
        [("[optimizer=adam]", "[optimizer=sgd]")],
        "P301",
        "- name: adam",
    ),
    (
        "two-identical-arms",
        "hydra.yaml",
        [
            (
                "    overrides: [optimizer=adam]",
                "    overrides: [optimizer=adam]\n  - name: adam2\n    overrides: [optimizer=adam]",
            )
        ],
        "P302",
        "- name: adam2",
    ),
    (
        "duplicate-arm-name",
        "hydra.yaml",
        [
            (
                "    overrides: [optimizer=adam]",
                "    overrides: [optimizer=adam]\n  - {name: adam, overrides: [optimizer.lr=0.2]}",
            )
        ],
        "P303",
        "{name: adam",
    ),
    (
        "arm-named-like-baseline",
        "hydra.yaml",
        [("- name: adam", "- name: sgd")],
        "P304",
        "- name: sgd",
    ),
    # configs/<arm>.yaml: one file for both names on macOS and Windows
    (
        "arm-names-differing-only-in-case",
        "hydra.yaml",
        [
            (
                "    overrides: [optimizer=adam]",
                "    overrides: [optimizer=adam]\n  - {name: Adam, overrides: [optimizer.lr=0.2]}",
            )
        ],
        "P303",
        "{name: Adam",
    ),
    (
        "arm-named-like-baseline-in-another-case",
        "hydra.yaml",
        [("- name: adam", "- name: SGD")],
        "P304",
        "- name: SGD",
    ),
    (
        "factor-key-not-in-config",
        "hydra.yaml",
        [("keys: [optimizer]", "keys: [optimiser]")],
        "P305",
        "keys: [optimiser]",
    ),
    (
        "duplicate-seed",
        "hydra.yaml",
        [("seeds: [0, 1, 2, 3, 4]", "seeds: [0, 1, 2, 3, 3]")],
        "P400",
        "seeds: [0",
    ),
    ("one-seed", "hydra.yaml", [("seeds: [0, 1, 2, 3, 4]", "seeds: [0]")], "P401", "seeds: [0]"),
    (
        "tuning-on-confirmation-seeds",
        "hydra.yaml",
        [("seeds: [1000]", "seeds: [3]")],
        "P402",
        "seeds: [3]",
    ),
    (
        "arm-space-unknown-arm",
        "hydra.yaml",
        [
            (
                "  early_stop:",
                "  arm_space:\n    adamm: {optimizer.lr: {log_uniform: [1.0e-5, 1.0e-2]}}\n  "
                "early_stop:",
            )
        ],
        "P403",
        "adamm:",
    ),
    (
        "arm-space-outside-factor",
        "hydra.yaml",
        [
            (
                "  early_stop:",
                "  arm_space:\n    adam: {model.width: {choice: [32, 64]}}\n  early_stop:",
            )
        ],
        "P404",
        "adam: {model.width",
    ),
    (
        "space-key-not-in-every-arm",
        "hydra.yaml",
        [
            (
                "    optimizer.lr:",
                "    optimizer.momentum: {uniform: [0.5, 0.99]}\n    optimizer.lr:",
            )
        ],
        "P405",
        "optimizer.momentum:",
    ),
    (
        "space-key-not-in-config",
        "hydra.yaml",
        [("    optimizer.lr:", "    model.dropout: {uniform: [0.0, 0.5]}\n    optimizer.lr:")],
        "P405",
        "model.dropout:",
    ),
    (
        "tuning-overwrites-the-factor",
        "hydra.yaml",
        [
            ("keys: [optimizer]", "keys: [optimizer.lr]"),
            ("[optimizer=adam]", "[optimizer.lr=0.01]"),
        ],
        "P412",
        "    optimizer.lr: {log",
    ),
    (
        "default-grace-not-below-exposure",
        "hydra.yaml",
        [("exposure: 10", "exposure: 1"), ("{rule: asha, grace: 2}", "{rule: median}")],
        "P407",
        "early_stop:",
    ),
    ("grid-with-a-range", "hydra.yaml", [("name: random", "name: grid")], "P406", "optimizer.lr:"),
    ("grace-not-below-exposure", "hydra.yaml", [("grace: 2", "grace: 10")], "P407", "grace: 10"),
    (
        "mean-last-k-over-exposure",
        "hydra.yaml",
        [("{rule: final}", "{rule: mean_last_k, k: 11}")],
        "P408",
        "mean_last_k",
    ),
    (
        "over-max-trials",
        "hydra.yaml",
        [("max_trials: 100", "max_trials: 17")],
        "P409",
        "max_trials: 17",
    ),
    (
        "more-looks-than-seeds",
        "hydra.yaml",
        [("budget:", "confirmation: {looks: 6}\nbudget:")],
        "P410",
        "looks: 6",
    ),
    (
        "looks-the-seeds-cannot-fill",
        "hydra.yaml",
        [("budget:", "confirmation: {looks: 4}\nbudget:")],
        "P410",
        "looks: 4",
    ),
    (
        "heldout-is-the-tuning-metric",
        "hydra.yaml",
        [("mode: max", "mode: max\n  heldout: val_acc")],
        "P411",
        "heldout: val_acc",
    ),
    (
        "heldout-is-the-tuning-metric-in-capitals",
        "hydra.yaml",
        [("mode: max", "mode: max\n  heldout: VAL_ACC")],
        "P411",
        "heldout: VAL_ACC",
    ),
    (
        "heldout-cap-below-confirmation",
        "hydra.yaml",
        [
            ("mode: max", "mode: max\n  heldout: test_acc"),
            ("max_trials: 100", "max_trials: 100\n  max_heldout_evaluations: 9"),
        ],
        "P413",
        "max_heldout_evaluations: 9",
    ),
    (
        "trainable-not-module-function",
        "hydra.yaml",
        [("fixture_trainable:train", "fixture_trainable.train")],
        "P500",
        "trainable:",
    ),
    (
        "command-script-missing",
        "hydra.yaml",
        [("trainable: fixture_trainable:train", "command: python no_such_script.py")],
        "P532",
        "command:",
    ),
    (
        "command-program-missing",
        "hydra.yaml",
        [("trainable: fixture_trainable:train", "command: no-such-trainer --fast")],
        "P532",
        "command:",
    ),
    (
        "trainable-module-missing",
        "hydra.yaml",
        [("fixture_trainable:train", "no_such_module:train")],
        "P501",
        "trainable:",
    ),
    (
        "trainable-function-missing",
        "hydra.yaml",
        [("fixture_trainable:train", "fixture_trainable:trian")],
        "P502",
        "trainable:",
    ),
    (
        "trainable-not-callable",
        "hydra.yaml",
        [("fixture_trainable:train", "fixture_trainable:CONSTANT")],
        "P502",
        "trainable:",
    ),
    (
        "trainable-raises-on-import",
        "hydra.yaml",
        [("fixture_trainable:train", "fixture_broken:train")],
        "P503",
        "trainable:",
    ),
]

# (id, fixture, edits, warning code, text on its line)
WARNING = [
    (
        "batch-size-factor",
        "inline.yaml",
        [
            ("keys: [model.width]", "keys: [data.batch_size]"),
            ("[model.width=64]", "[data.batch_size=32]"),
            ("[model.width=128]", "[data.batch_size=64]"),
        ],
        "P900",
        "factor:",
    ),
    (
        "accumulation-in-a-group",
        "hydra.yaml",
        [
            ("keys: [optimizer]", "keys: [data]"),
            ("[optimizer=sgd]", "[data.accum_steps=1]"),
            ("[optimizer=adam]", "[data.accum_steps=4]"),
            ("    optimizer.lr:", "    data.batch_size: {choice: [16, 32]}\n    optimizer.lr:"),
        ],
        "P900",
        "keys: [data]",
    ),
    (
        "few-seeds",
        "hydra.yaml",
        [("seeds: [0, 1, 2, 3, 4]", "seeds: [0, 1, 2]")],
        "P901",
        "seeds: [0, 1, 2]",
    ),
    (
        "grid-size-mismatch",
        "hydra.yaml",
        [
            ("name: random", "name: grid"),
            ("{log_uniform: [1.0e-4, 1.0e-1]}", "{choice: [0.1, 0.01, 0.001]}"),
        ],
        "P902",
        "trials_per_arm",
    ),
    (
        "floats-for-an-integer",
        "hydra.yaml",
        [("    optimizer.lr:", "    model.depth: {uniform: [1, 4]}\n    optimizer.lr:")],
        "P942",
        "model.depth:",
    ),
    (
        "lightning-callback-counting-steps",
        "hydra.yaml",
        [
            ("trainable: fixture_trainable:train", "trainable: fixture_lightning:train"),
            ("  unit: epoch", "  unit: step"),
        ],
        "P943",
        "  unit: step",
    ),
    (
        "argparse-script-without-args-argparse",
        "hydra.yaml",
        [("trainable: fixture_trainable:train", "command: python fixture_argparse.py")],
        "P944",
        "command:",
    ),
    (
        "log-floats-for-an-integer",
        "hydra.yaml",
        [("    optimizer.lr:", "    data.batch_size: {log_uniform: [16, 128]}\n    optimizer.lr:")],
        "P942",
        "data.batch_size:",
    ),
]

# contracts at the edge of a rule, on the passing side
PASSING = [
    ("base-hydra", "hydra.yaml", []),
    ("base-inline", "inline.yaml", []),
    ("grace-just-below-exposure", "hydra.yaml", [("grace: 2", "grace: 9")]),
    ("mean-last-k-equal-exposure", "hydra.yaml", [("{rule: final}", "{rule: mean_last_k, k: 10}")]),
    ("exactly-max-trials", "hydra.yaml", [("max_trials: 100", "max_trials: 18")]),
    ("most-looks-the-seeds-fill", "hydra.yaml", [("budget:", "confirmation: {looks: 3}\nbudget:")]),
    ("heldout-differs", "hydra.yaml", [("mode: max", "mode: max\n  heldout: test_acc")]),
    (
        "heldout-cap-equals-confirmation",
        "hydra.yaml",
        [
            ("mode: max", "mode: max\n  heldout: test_acc"),
            ("max_trials: 100", "max_trials: 100\n  max_heldout_evaluations: 10"),
        ],
    ),
    (
        "arm-space-inside-factor",
        "hydra.yaml",
        [
            (
                "  early_stop:",
                "  arm_space:\n    adam: {optimizer.lr: {log_uniform: [1.0e-5, 1.0e-2]}}\n  "
                "early_stop:",
            )
        ],
    ),
    (
        "arm-space-for-baseline",
        "hydra.yaml",
        [
            (
                "  early_stop:",
                "  arm_space:\n    sgd: {optimizer.momentum: {uniform: [0.5, 0.99]}}\n  "
                "early_stop:",
            )
        ],
    ),
    (
        "tuned-factor-with-arm-ranges",
        "hydra.yaml",
        [
            ("keys: [optimizer]", "keys: [optimizer.lr]"),
            ("[optimizer=adam]", "[optimizer.lr=0.01]"),
            (
                "  early_stop:",
                "  arm_space:\n    adam: {optimizer.lr: {log_uniform: [1.0e-3, 1.0e-1]}}\n  "
                "early_stop:",
            ),
        ],
    ),
    (
        "integers-for-an-integer-and-floats-for-a-float",
        "hydra.yaml",
        [("    optimizer.lr:", "    model.depth: {int: [1, 4]}\n    optimizer.lr:")],
    ),
    (
        "grid-with-choices",
        "hydra.yaml",
        [
            ("name: random", "name: grid"),
            ("{log_uniform: [1.0e-4, 1.0e-1]}", "{choice: [0.1, 0.01, 0.001, 0.0001]}"),
        ],
    ),
    (
        "factor-key-inside-a-list",
        "inline.yaml",
        [
            ("data: {batch_size: 32}", "data: {batch_size: 32}\n    layers: [64, 64]"),
            (
                "factor: {name: width, keys: [model.width]}",
                "factor: {name: width, keys: [layers.0]}",
            ),
            ("[model.width=64]", "['layers=[64,64]']"),
            ("[model.width=128]", "['layers=[128,64]']"),
        ],
    ),
    (
        "deleting-the-last-key-of-a-mapping",
        "inline.yaml",
        [
            ("model: {width: 64, depth: 2}", "model: {width: 64}\n    head: {dropout: 0.1}"),
            (
                "factor: {name: width, keys: [model.width]}",
                "factor: {name: dropout, keys: [head.dropout]}",
            ),
            ("[model.width=64]", "[]"),
            ("[model.width=128]", "['~head.dropout']"),
        ],
    ),
    (
        "lightning-callback-counting-epochs",
        "hydra.yaml",
        [
            ("trainable: fixture_trainable:train", "trainable: fixture_lightning:train"),
            ("  unit: epoch", "  unit: Epochs"),
        ],
    ),
    (
        "lightning-callback-in-a-comment-only",
        "hydra.yaml",
        [
            ("trainable: fixture_trainable:train", "trainable: fixture_lightning_named:train"),
            ("  unit: epoch", "  unit: step"),
        ],
    ),
    (
        "command-skips-import",
        "hydra.yaml",
        [("trainable: fixture_trainable:train", "command: python fixture_broken.py")],
    ),
    (
        "factor-key-default-is-name",
        "inline.yaml",
        [("factor: {name: width, keys: [model.width]}", "factor: {name: model}")],
    ),
    (
        "value-override-on-group-default",
        "hydra.yaml",
        [("[optimizer=adam]", "[optimizer.momentum=0.5]")],
    ),
    (
        "two-different-arms",
        "hydra.yaml",
        [
            (
                "    overrides: [optimizer=adam]",
                "    overrides: [optimizer=adam]\n  - name: fast-sgd\n    overrides: "
                "[optimizer.momentum=0.5]",
            ),
            ("max_trials: 100", "max_trials: 27"),
        ],
    ),
]


def _codes(result):
    return [(d.code, d.line) for d in result.diagnostics if d.severity == "error"]


@pytest.mark.parametrize(
    ("fixture", "edits", "code", "needle"), [c[1:] for c in FAILING], ids=[c[0] for c in FAILING]
)
def test_a_broken_rule_is_an_error_at_its_line(tmp_path, fixture, edits, code, needle):
    text = edited(fixture, edits)
    result = validate(write_contract(tmp_path, text))
    assert not result.valid
    assert result.exit_code == 1
    found = [d for d in result.diagnostics if d.code == code and d.severity == "error"]
    assert found, f"expected {code}, got {_codes(result)}"
    expected_line = line_of(text, needle)
    assert found[0].line == expected_line, (
        f"{code} at line {found[0].line}, expected {expected_line}: {found[0].format()}"
    )
    assert found[0].column >= 1
    assert found[0].hint, "every diagnostic says how to fix it"


@pytest.mark.parametrize(
    ("fixture", "edits", "code", "needle"), [c[1:] for c in WARNING], ids=[c[0] for c in WARNING]
)
def test_a_warning_does_not_fail_unless_strict(tmp_path, fixture, edits, code, needle):
    text = edited(fixture, edits)
    path = write_contract(tmp_path, text)
    result = validate(path)
    assert result.valid, [d.format() for d in result.diagnostics]
    found = [d for d in result.diagnostics if d.code == code]
    assert found and found[0].severity == "warning"
    assert found[0].line == line_of(text, needle)
    strict = validate(path, strict=True)
    assert not strict.valid
    assert any(d.code == code and d.severity == "error" for d in strict.diagnostics)


@pytest.mark.parametrize(
    ("fixture", "edits"), [c[1:] for c in PASSING], ids=[c[0] for c in PASSING]
)
def test_a_contract_that_keeps_the_rules_is_valid(tmp_path, fixture, edits):
    result = validate(write_contract(tmp_path, edited(fixture, edits)))
    assert result.valid, [d.format() for d in result.diagnostics]
    assert result.exit_code == 0
    assert not [d for d in result.diagnostics if d.severity == "warning"], [
        d.format() for d in result.diagnostics
    ]


@pytest.mark.parametrize(
    ("key", "near"),
    [("optimizer.learning_rate", "optimizer.lr"), ("optimizer.llr", "optimizer.lr")],
)
def test_a_misspelt_tuning_key_gets_the_did_you_mean_overrides_get(tmp_path, key, near):
    """P405 suggests the config's near key by P204's rule (near_path): a typo, or a name and its
    initials."""
    path = write_contract(tmp_path, edited("hydra.yaml", [("    optimizer.lr:", f"    {key}:")]))
    found = [d for d in validate(path).diagnostics if d.code == "P405"]
    assert found and f"Did you mean `{near}`?" in found[0].format(), [d.format() for d in found]


def test_one_suggestion_rule_for_overrides_and_tuning_keys():
    from planner._contract.compose import near_path

    leaves = {"optim.lr": 0.1, "optim.momentum": 0.9, "model.hidden": 16, "model.learning_rate": 1}
    assert (
        near_path(leaves, "optim.learning_rate") == "optim.lr"
    )  # the sibling whose name is its initials
    assert near_path(leaves, "model.lr") == "model.learning_rate"
    assert near_path(leaves, "model.hiden") == "model.hidden"
    assert near_path(leaves, "data.size") is None
