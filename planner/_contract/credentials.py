"""No credential enters a contract or a config (P230), and no resolver hides in a Hydra file's
`hydra:` node.

What a trainable receives is recorded exactly (planner._core.redact): so a credential must never be
in what it receives from the contract. `check_credentials` refuses, without printing the value:

- a text under a credential's name that could be one (`db_password: hunter2`; not `pad_token:
  "<pad>"`, not `token_dropout: 0.1`), and a text of a credential's shape anywhere (`hf_...`,
  `sk-...`, a URL with user:password, ...): in the contract itself (config values, overrides,
  tuning choices, `command:`), in every arm's composed config, and in every Hydra config file of
  `config.dir`, its `hydra:` node included (links to files and folders followed, as Hydra follows
  them: planner._contract.compose.config_files);
- a resolver call in a Hydra config file's `hydra:` node (P205), which composing never reads but the
  trainable's own Hydra resolves (`${oc.env:HF_TOKEN}` as a log file name); only Hydra's own `now`
  and `hydra` resolvers are allowed there (`hydra.run.dir: outputs/${now:%Y-%m-%d}`).

What is a credential is decided in planner._core.redact, the one place the scrubber also reads.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from planner._core.diagnostics import Diagnostic, Severity
from planner._core.redact import Redactor, credentials_in, secret_values

CODE = "P230"
HINT = (
    "Pass a credential through the environment instead: export it in the shell that runs plan (an "
    "environment variable such as HF_TOKEN) and read it with os.environ in the trainable or the "
    "script; "
    "planner never records the environment, and records a contract and its configs exactly as "
    "they are"
)


def _dotted(path: tuple[Any, ...]) -> str:
    return (
        Redactor().text(".".join(str(p) for p in path)) or "(the top)"
    )  # a key may itself be a token


def check_credentials(
    contract, loaded, composed, contract_dir: str | os.PathLike
) -> list[Diagnostic]:
    """Every credential in the contract, its composed configs and its Hydra files, as Diagnostics
    (P230, P205)."""
    out: list[Diagnostic] = []

    def add(
        code: str,
        path: tuple[Any, ...],
        message: str,
        hint: str = HINT,
        severity: Severity = "error",
    ) -> None:
        line, column = loaded.position(path)
        out.append(
            Diagnostic(
                code=code,
                severity=severity,
                message=message,
                path=".".join(map(str, path)),
                file=loaded.file,
                line=line,
                column=column,
                hint=hint,
            )
        )

    flagged: set[str] = set()
    for found_at, what in credentials_in(loaded.data):
        flagged.add(_dotted(found_at))
        add(
            CODE,
            found_at,
            f"{_dotted(found_at)} holds a credential ({what}); a contract never holds one",
        )
    where_config = ("config", "dir") if getattr(contract.config, "dir", None) else ("config",)
    arms_of: dict[tuple[str, str], list[str]] = {}
    for arm, config in (composed.configs if composed is not None else {}).items():
        for found_at, what in credentials_in(config):
            arms_of.setdefault((_dotted(found_at), what), []).append(arm)
    for (key, what), arms in arms_of.items():
        if not any(key == f or f.endswith("." + key) for f in flagged):
            add(
                CODE,
                where_config,
                f"the composed config of {', '.join(arms)} holds a credential at {key} ({what}); "
                "a config never holds one",
            )
    config_dir = getattr(contract.config, "dir", None)
    if config_dir:
        base = Path(contract_dir) / config_dir
        for name, path, what, code in hydra_file_findings(base):
            if code == "P907":
                add(
                    code,
                    ("config", "dir"),
                    f"the walk of config.dir {config_dir!r} stopped at {what}: its files "
                    "past that are not checked for credentials (P230) or resolver calls (P205)",
                    "Keep config.dir to the Hydra configs: move data, outputs and environments "
                    "out of it, or "
                    "remove the link to a large folder",
                    severity="warning",
                )
            elif code == "P205":
                add(
                    code,
                    ("config", "dir"),
                    f"{name}: {path} calls a resolver in Hydra's own `hydra:` node; the "
                    "script's Hydra would resolve it (reading the environment into a log file "
                    "name)",
                    "Write the value itself in the hydra: node, or leave it out",
                )
            else:
                add(
                    code,
                    ("config", "dir"),
                    f"{name}: {path} holds a credential ({what}); a Hydra config file "
                    "never holds one",
                )
    return out


def hydra_file_findings(base: Path) -> list[tuple[str, str, str, str]]:
    """(file, dotted key, what, code) of every credential (P230) in the Hydra files under `base`,
    of every resolver call in a file's `hydra:` node (P205), and, last, where the walk of `base`
    stopped short (P907)."""
    import yaml

    from planner._contract.compose import (
        calls_resolver,
        config_files,
        load_config_text,
        read_config_file,
    )
    from planner._contract.paths import flatten

    found = []
    files = config_files(base)
    for path in files:
        try:
            text = read_config_file(path)
            if text is None:
                continue
            data = load_config_text(text)
        except (OSError, UnicodeDecodeError, yaml.YAMLError, RecursionError):
            continue  # Hydra says what is wrong with it, if it is used
        name = str(path.relative_to(base))
        for key, what in credentials_in(data):
            found.append((name, _dotted(key), what, CODE))
        hydra = data.get("hydra") if isinstance(data, dict) else None
        if hydra is None:
            continue
        values = {"": hydra} if isinstance(hydra, str) else flatten(hydra, into_lists=True)
        for dotted, value in values.items():
            if isinstance(value, str) and calls_resolver(value) and not _only_hydra_own(value):
                found.append(
                    (name, "hydra" + (f".{dotted}" if dotted else ""), "a resolver", "P205")
                )
    if files.cut:
        found.append(("", "", files.cut, "P907"))
    return found


# Hydra's own resolvers, which read the clock or Hydra's own state (neither the environment nor
# user code): `hydra.run.dir: outputs/${now:%Y-%m-%d}` is how Hydra apps are written; in the hydra:
# node they are allowed.
HYDRA_OWN_RESOLVERS = frozenset({"now", "hydra"})


def _only_hydra_own(text: str) -> bool:
    """True when every resolver `text` calls is one of HYDRA_OWN_RESOLVERS, by its plain name."""
    from planner._contract.compose import resolvers_called

    names = resolvers_called(text)
    return names is not None and all(
        name in HYDRA_OWN_RESOLVERS for name in names
    )  # a built name is none


def without_credentials(diagnostics: list[Diagnostic], loaded, composed) -> list[Diagnostic]:
    """`diagnostics` with every credential of the contract and its configs cut from their messages
    and hints: once P230 has found one, another rule (P300's two values, P204's override) must not
    print it either."""
    if not any(d.code == CODE for d in diagnostics):
        return diagnostics
    from dataclasses import replace

    values = secret_values(loaded.data)
    for config in (composed.configs if composed is not None else {}).values():
        values += secret_values(config)
    redactor = Redactor(values)
    return [
        replace(d, message=redactor.text(d.message), hint=redactor.text(d.hint))
        for d in diagnostics
    ]
