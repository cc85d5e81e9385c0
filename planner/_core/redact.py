"""Secrets never reach the run folder.

A value under a key whose name looks like a credential (password, passwd,
secret, token, api_key, access_key, private_key, credential(s), auth, ...:
matched as a whole word of the key's name, so `max_tokens` is not one) is
replaced by `<redacted>` wherever the run folder would hold it: the frozen
contract, configs/*.yaml, identity.json, every trial record's `config` and
`params`, events. And the VALUES of those secrets, and of environment variables
with credential-like names, are cut out of every string written (error
messages, tracebacks, captured output), so a trainable that prints or raises
with a secret in its message does not leak it either.

The trainable still receives the real config: redaction happens at the one
place the driver writes (planner._store.writer.RunStore) and in the captured output.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from typing import Any

REDACTED = "<redacted>"
_WORDS = (r"password|passwd|passphrase|pwd|secret|secrets|token|api_?key|apikey|access_?key|secret_?key|"
          r"private_?key|client_?secret|credentials?|auth|authorization|cookie|session_?key|signature")
SECRET_NAME = re.compile(rf"(?:^|[^a-z0-9])(?:{_WORDS})(?:$|[^a-z0-9])", re.IGNORECASE)
MIN_SECRET_LEN = 6  # shorter values are not cut out of free text (too many false hits); keys are still redacted


_NOT_SECRETS = {"PWD", "OLDPWD"}  # the shell's working folders, not passwords: redacting them hid every path


def looks_secret(name: str) -> bool:
    """True when a key or variable name looks like it holds a credential."""
    if str(name) in _NOT_SECRETS:
        return False
    spaced = re.sub(r"([a-z])([A-Z])", r"\1_\2", str(name))  # apiKey -> api_Key
    return bool(SECRET_NAME.search(spaced)) or bool(SECRET_NAME.search(spaced.replace("-", "_")))


def secret_values(value: Any, under_secret: bool = False) -> list[str]:
    """Every scalar under a credential-like key in a nested config, as text."""
    out: list[str] = []
    if isinstance(value, Mapping):
        for k, v in value.items():
            out += secret_values(v, under_secret or looks_secret(str(k)))
    elif isinstance(value, list | tuple):
        for v in value:
            out += secret_values(v, under_secret)
    elif under_secret and value is not None and not isinstance(value, bool):
        out.append(str(value))
    return out


def env_secrets(environ: Mapping[str, str] | None = None) -> list[str]:
    environ = os.environ if environ is None else environ
    return [v for k, v in environ.items() if looks_secret(k) and v]


class Redactor:
    """Scrubs secret keys and known secret values out of JSON-like data and text."""

    def __init__(self, values: Iterable[str] = ()):
        found = sorted({v for v in values if len(v) >= MIN_SECRET_LEN}, key=len, reverse=True)
        self.values = found
        self._pattern = re.compile("|".join(re.escape(v) for v in found)) if found else None

    @classmethod
    def for_run(cls, *configs: Any, environ: Mapping[str, str] | None = None) -> Redactor:
        values: list[str] = env_secrets(environ)
        for config in configs:
            values += secret_values(config)
        return cls(values)

    def text(self, value: str) -> str:
        return value if self._pattern is None else self._pattern.sub(REDACTED, value)

    def scrub(self, value: Any, under_secret: bool = False) -> Any:
        if isinstance(value, Mapping):
            return {k: self.scrub(v, under_secret or looks_secret(str(k))) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self.scrub(v, under_secret) for v in value]
        if under_secret and value is not None and not isinstance(value, bool):
            return REDACTED
        if isinstance(value, str):
            return self.text(value)
        return value
