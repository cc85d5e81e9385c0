"""Secrets never reach the run folder.

A value under a key whose name looks like a credential (password, passwd,
secret, token, api_key, access_key, private_key, credential(s), auth, ...:
matched by the word rule of `looks_secret`, so `max_tokens` is not one) is
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
# The one secret-name rule (docs/run-folder.md, "Secrets"): a name is split into words (at anything not a
# letter or digit, and at camelCase humps); it looks like a credential when one of its words is one of WORDS,
# or contains one of STEMS. So `db_password`, `apiKey`, `HF_TOKEN`, `AWS_SECRET_ACCESS_KEY`, `dbpassword` are
# secrets, and `max_tokens`, `seed_key`, `keyboard`, `author` are not (`key` alone is no credential word).
WORDS = frozenset({"password", "passwd", "passphrase", "pwd", "pass", "secret", "secrets", "token", "apikey",
                   "credential", "credentials", "auth", "authorization", "cookie", "signature", "dsn",
                   "sessionkey", "privatekey", "accesskey", "secretkey"})
STEMS = ("password", "passwd", "secret", "apikey", "credential", "privatekey", "accesskey", "authtoken")
MIN_SECRET_LEN = 6  # shorter values are not cut out of free text (too many false hits); keys are still redacted


_NOT_SECRETS = {"PWD", "OLDPWD"}  # the shell's working folders, not passwords: redacting them hid every path
_HUMP = re.compile(r"([a-z0-9])([A-Z])")
_SPLIT = re.compile(r"[^a-zA-Z0-9]+")


def looks_secret(name: str) -> bool:
    """True when a key or variable name looks like it holds a credential (the rule above)."""
    name = str(name)
    if name in _NOT_SECRETS:
        return False
    words = [w.lower() for w in _SPLIT.split(_HUMP.sub(r"\1_\2", name)) if w]
    joined = "".join(words)
    for i, word in enumerate(words):
        if word in WORDS or any(stem in word for stem in STEMS):
            return True
        if i + 1 < len(words) and word + words[i + 1] in WORDS:  # api_key, access_key, private_key
            return True
    return any(stem in joined for stem in STEMS)


# user:password@ in a URL (postgres://svc:PASS@host/x): always cut, whatever key holds the URL.
URL_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)([^\s/?#@\"'<>]*)@")
# name=value, name: value, 'name': 'value' in free text, where the name looks like a credential.
_ASSIGNED = re.compile(r"""(?P<name>[A-Za-z_][A-Za-z0-9_.-]*)(?P<sep>['"]?\s*[=:]\s*['"]?)(?P<value>[^\s'",;}&]+)""")


def url_secrets(text: str) -> list[str]:
    """The user:password parts of every URL in `text` (and the password alone)."""
    out = []
    for match in URL_USERINFO.finditer(text):
        info = match.group(2)
        if info:
            out.append(info)
            if ":" in info:
                out.append(info.split(":", 1)[1])
    return out


def _cut_userinfo(text: str) -> str:
    return URL_USERINFO.sub(lambda m: m.group(1) + (REDACTED + "@" if m.group(2) else "@"), text)


def _cut_assigned(text: str) -> str:
    def one(m: re.Match) -> str:
        if looks_secret(m.group("name")) and m.group("value") != REDACTED and m.group("value")[:1] not in "{[(":
            return m.group("name") + m.group("sep") + REDACTED
        return m.group(0)

    return _ASSIGNED.sub(one, text)


def secret_values(value: Any, under_secret: bool = False) -> list[str]:
    """Every scalar under a credential-like key in a nested config, as text, and every URL's user:password."""
    out: list[str] = []
    if isinstance(value, Mapping):
        for k, v in value.items():
            out += secret_values(v, under_secret or looks_secret(str(k)))
    elif isinstance(value, list | tuple):
        for v in value:
            out += secret_values(v, under_secret)
    elif under_secret and value is not None and not isinstance(value, bool):
        out.append(str(value))
    elif isinstance(value, str):
        out += url_secrets(value)
    return out


def env_secrets(environ: Mapping[str, str] | None = None) -> list[str]:
    """Values of environment variables with credential-like names, and the user:password of URLs in any."""
    environ = os.environ if environ is None else environ
    out = [v for k, v in environ.items() if looks_secret(k) and v]
    for v in environ.values():
        if "://" in v:
            out += url_secrets(v)
    return out


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
        """`value` with every known secret, every URL's user:password and every `secret_name=value` cut out."""
        if self._pattern is not None:
            value = self._pattern.sub(REDACTED, value)
        if "://" in value:
            value = _cut_userinfo(value)
        if "=" in value or ":" in value:
            value = _cut_assigned(value)
        return value

    def stream(self) -> StreamScrubber:
        """A scrubber for output that arrives in pieces: a secret split across writes is still cut."""
        return StreamScrubber(self)

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


class StreamScrubber:
    """Scrubs text written in pieces (a secret printed in two parts, or one character at a time).

    Text is held until a line ends; a whole line is scrubbed and let through. A line longer than
    HOLD characters is let through in parts, each cut where no known secret (and no URL) straddles it.
    `flush()` scrubs and returns what is held (call it at the end).
    """

    HOLD = 1 << 16

    def __init__(self, redactor: Redactor):
        self.redactor = redactor
        self.pending = ""

    def feed(self, text: str) -> str:
        self.pending += text
        cut = self.pending.rfind("\n") + 1
        if cut == 0 and len(self.pending) > self.HOLD:
            cut = self._safe_cut()
        if cut <= 0:
            return ""
        out, self.pending = self.pending[:cut], self.pending[cut:]
        return self.redactor.text(out)

    def _safe_cut(self) -> int:
        longest = max([len(v) for v in self.redactor.values] or [0])
        cut = len(self.pending) - max(longest, 256)  # 256: room for a URL's userinfo or a `name=value`
        for match in re.finditer(r"\s", self.pending[cut - 4096 if cut > 4096 else 0: cut][::-1]):
            cut -= match.start()
            break
        return max(cut, 0)

    def flush(self) -> str:
        out, self.pending = self.pending, ""
        return self.redactor.text(out) if out else ""


class ScrubbedStream:
    """A text stream (the terminal) whose every write goes through a Redactor first.

    Each write is scrubbed on its own (nothing is held: live progress stays live); `plan` wraps its
    standard output and error in one, so no command prints a secret it read.
    """

    def __init__(self, stream: Any, redactor: Redactor):
        self._stream = stream
        self._redactor = redactor

    def write(self, text: str) -> int:
        self._stream.write(self._redactor.text(text) if isinstance(text, str) else text)
        return len(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)
