"""Credentials: the one definition of what is one, the one scrubber of free text.

A credential never enters a contract or a config: `plan validate` refuses one (P230,
planner._contract.credentials, which asks this module what is a credential). So what a trainable
receives is recorded exactly as it is (the frozen contract, configs/*.yaml, every trial's `config`
and `params`, selection.json) and resume, reeval and lineage get the real values back; nothing is
ever rewritten to `<redacted>` there. A credential reaches a trainable through the environment,
which planner never records (identity.json keeps allow-listed variables only).

What is printed or written as free text (captured output, exception messages and tracebacks, Hydra's
logs, the terminal, status, reports) still goes through `Redactor.text`, which cuts:

- the values of environment variables with credential names (and their repr/JSON-escaped spellings,
  their hex and base64: `_spellings`);
- values of a credential shape (`SHAPES`: hf_..., sk-..., ghp_/gho_/github_pat_..., AKIA...
  (akia... too), xox?-..., glpat-..., pypi-AgE..., npm_..., AIza..., an Azure
  AccountKey=/SharedAccessKey= value and SAS sig=, user:password@host without a scheme, a JWT, a
  PEM private key, a Slack webhook) and a URL's userinfo, whatever characters it holds (also with
  its slashes JSON-escaped);
- a command's or a statement's own password spelling (`COMMAND_PASSWORDS`: mysql -pPASS, curl -u
  user:PASS, sshpass -p PASS, SQL's IDENTIFIED BY 'PASS' and PASSWORD 'PASS', a netrc's password);
- `Authorization:` header values of any scheme (the scheme and the credential), `Bearer <token>`,
  `Basic <b64>`;
- `--password VALUE`, `--hf-token VALUE`, ... flags, and `name=value` / `name: value` pairs under a
  credential name (`name => value` too, and inside another pair's value), whatever punctuation the
  value holds (quoted values up to their closing quote).

The name rule (`looks_secret`): a name is split into words (at anything not a letter or digit and at
camelCase humps); it is a credential's name when its LAST word is a credential noun (NOUNS), ends
with one (STEMS: `dbpassword`), or its last two words make one (`api_key`, `access_key`,
`private_key`). So `db_password`, `apiKey`, `HF_TOKEN`, `AWS_SECRET_ACCESS_KEY`, `client-secret`
are credentials' names, and `token_dropout`, `max_token_length`, `pad_token_id`, `max_tokens`,
`skip_pass`, `seed_key`, `author` are not. A name alone makes a credential only of a value that
could be one (`could_be_credential`): not a number, a bool, an empty text, `???`, or a tokenizer's
special token like `<pad>`, `</s>` or `[PAD]`.
"""

from __future__ import annotations

import base64
import functools
import json
import os
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from planner._core.text import terminal_safe

REDACTED = "<redacted>"
NOUNS = frozenset(
    {
        "password",
        "passwd",
        "passphrase",
        "pwd",
        "secret",
        "secrets",
        "token",
        "apikey",
        "credential",
        "credentials",
        "auth",
        "authorization",
        "cookie",
        "dsn",
        "sessionkey",
        "privatekey",
        "accesskey",
        "secretkey",
        "authtoken",
        "accesstoken",
        "refreshtoken",
        "clientsecret",
        "pw",
        "accountkey",
        "sharedaccesskey",
    }
)
STEMS = (
    "password",
    "passwd",
    "secret",
    "apikey",
    "credential",
    "credentials",
    "privatekey",
    "accesskey",
    "authtoken",
    "token",
)
MIN_SECRET_LEN = (
    6  # shorter values of the environment are not searched for in free text (too many false hits)
)
_MIN_ENCODED = (
    8  # base64 of MIN_SECRET_LEN bytes: a shorter part of a secret's base64 is not searched for
)

_NOT_SECRETS = {"PWD", "OLDPWD"}  # the shell's working folders, not passwords
_HUMP = re.compile(r"([a-z0-9])([A-Z])")
_SPLIT = re.compile(r"[^a-zA-Z0-9]+")
_STEM_EXCEPT = ("tokens",)  # `max_tokens`: a count, not a credential


def _words(name: str) -> list[str]:
    return [w.lower() for w in _SPLIT.split(_HUMP.sub(r"\1_\2", str(name))) if w]


def looks_secret(name: str) -> bool:
    """True when a key, flag or variable name is a credential's name (the last-word rule above)."""
    name = str(name)
    if name in _NOT_SECRETS:
        return False
    words = _words(name)
    if not words:
        return False
    last = words[-1]
    if last in NOUNS or (len(words) > 1 and words[-2] + last in NOUNS):
        return True
    return last not in _STEM_EXCEPT and any(last.endswith(stem) for stem in STEMS)


class _Lazy:
    """A regular expression compiled when it is first used. A scrub searches a rule only in a text
    that holds one of the rule's needles (`may_hold`), so a command that prints a few plain lines
    compiles few of the rules below; compiling all of them was most of this module's import."""

    __slots__ = ("_compiled", "_flags", "pattern")

    def __init__(self, pattern: str, flags: int = 0) -> None:
        self.pattern = pattern
        self._flags = flags
        self._compiled: re.Pattern[str] | None = None

    @property
    def compiled(self) -> re.Pattern[str]:
        if self._compiled is None:
            self._compiled = re.compile(self.pattern, self._flags)
        return self._compiled

    @property
    def flags(self) -> int:
        return self.compiled.flags

    def search(self, text: str, pos: int = 0) -> re.Match[str] | None:
        return self.compiled.search(text, pos)

    def match(self, text: str, pos: int = 0) -> re.Match[str] | None:
        return self.compiled.match(text, pos)

    def finditer(self, text: str) -> Iterator[re.Match[str]]:
        return self.compiled.finditer(text)

    def sub(self, repl: str | Callable[[re.Match[str]], str], text: str) -> str:
        return self.compiled.sub(repl, text)


_SPECIAL_TOKEN = _Lazy(r"^(<[^<>\s]{1,24}>|\[[A-Za-z_]{1,24}\]|<\|[^|\s]{1,24}\|>|\?\?\?)$")
_NOT_CREDENTIALS = frozenset({"", "none", "null", "true", "false", "yes", "no", REDACTED})


_NUMBER = _Lazy(
    r"^[-+]?(\d[\d_]*\.?\d*(e[-+]?\d+)?|\.\d+(e[-+]?\d+)?|\.?inf|\.?nan)$", re.IGNORECASE
)


def could_be_credential(value: Any, numbers: bool = False) -> bool:
    """True when `value` could be a credential if its name says it is one: a text that is no
    special token (nor a number written as text, unless `numbers`: free text cuts `pin=123456`, a
    contract may hold it)."""
    if not isinstance(value, str):
        return False
    text = value.strip()
    if (
        text.lower() in _NOT_CREDENTIALS
        or _SPECIAL_TOKEN.match(text)
        or (not numbers and _NUMBER.match(text))
    ):
        return False
    return not re.fullmatch(r"\$\{[A-Za-z0-9_.\[\]-]*\}", text)  # a plain reference to another key


# The credential shapes, by kind: a value of one of these is a credential wherever it is.
_B = r"(?<![A-Za-z0-9_-])"  # not inside a longer word
SHAPES: tuple[tuple[str, _Lazy], ...] = (
    (
        "a PEM private key",
        _Lazy(
            r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----(?:[\s\S]*?-----END [A-Z0-9 ]*PRIVATE "
            r"KEY-----|[\s\S]*)"
        ),
    ),
    (
        "a Slack webhook",
        _Lazy(r"https://hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9/_-]+"),
    ),
    (
        "a JSON web token",
        _Lazy(_B + r"eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}"),
    ),
    ("a Hugging Face token", _Lazy(_B + r"hf_[A-Za-z0-9]{12,}")),
    ("an API key (sk-...)", _Lazy(_B + r"sk[-_][A-Za-z0-9][A-Za-z0-9_-]{11,}")),
    (
        "a GitHub token",
        _Lazy(_B + r"(?:gh[pousr]_[A-Za-z0-9]{16,}|github_pat_[A-Za-z0-9_]{20,})"),
    ),
    # also lowercased (a lowercased log, a host name): then only of the key ids' own alphabet
    # (base32: a-z, 2-7), with a digit, as one word (not `asiancuisinedatasets`, not
    # `asiasoutheast1bucket`)
    (
        "an AWS access key id",
        _Lazy(
            r"(?<![A-Z0-9])(?:AKIA|ASIA|AGPA|AIDA|AROA)[A-Z0-9]{16}(?![A-Z0-9])|"
            r"(?<![A-Za-z0-9])(?:akia|asia|agpa|aida|aroa)(?=[a-z]{0,15}[2-7])"
            r"[a-z2-7]{16}(?![A-Za-z0-9])"
        ),
    ),
    ("a Slack token", _Lazy(_B + r"xox[abposr]-[A-Za-z0-9-]{10,}")),
    ("a GitLab token", _Lazy(_B + r"gl(?:pat|dt|rt|ptt)-[A-Za-z0-9_-]{16,}")),
    ("a PyPI token", _Lazy(_B + r"pypi-AgE[A-Za-z0-9_-]{16,}")),
    ("an npm token", _Lazy(_B + r"npm_[A-Za-z0-9]{30,}")),
    ("a Google API key", _Lazy(_B + r"AIza[0-9A-Za-z_-]{30,}")),
    (
        "an Azure account key",
        _Lazy(r"(?i)(?:(?<=accountkey=)|(?<=sharedaccesskey=))[A-Za-z0-9+/%]{16,}={0,2}"),
    ),
    ("an Azure SAS signature", _Lazy(r"(?i)(?<=[?&;]sig=)[A-Za-z0-9+/%=]{16,}")),
    # user:password@host without a scheme (`svc:pw@db.internal:5432`); not an image digest
    # (`name:1.0@sha256:...`)
    (
        "a user:password@host",
        _Lazy(
            r"(?<![\w/:.@%+~-])[A-Za-z][A-Za-z0-9._~%+-]*:[^\s:@/\"'<>]+(?=@(?!sha\d)"
            r"[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+)"
        ),
    ),
)
# What each shape cannot match without: a text that holds none of a shape's needles is not searched
# for it (`in` costs a small part of a pattern's search). Folded:
# looked for in the lowercased text (the pattern ignores case, or spells out the cases it takes).
# tests/unit/test_redact.py checks every rule below has needles and that a text a pattern matches
# always holds one.
NEEDLES: dict[str, tuple[tuple[str, ...], bool]] = {
    "a PEM private key": (("-----BEGIN ",), False),
    "a Slack webhook": (("https://hooks.slack.com/",), False),
    "a JSON web token": (("eyJ",), False),
    "a Hugging Face token": (("hf_",), False),
    "an API key (sk-...)": (("sk-", "sk_"), False),
    "a GitHub token": (("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"), False),
    "an AWS access key id": (("akia", "asia", "agpa", "aida", "aroa"), True),
    "a Slack token": (("xox",), False),
    "a GitLab token": (("glpat-", "gldt-", "glrt-", "glptt-"), False),
    "a PyPI token": (("pypi-AgE",), False),
    "an npm token": (("npm_",), False),
    "a Google API key": (("AIza",), False),
    "an Azure account key": (("accountkey=", "sharedaccesskey="), True),
    "an Azure SAS signature": (("sig=",), True),
    "a user:password@host": (("@",), False),
    "a URL's userinfo": (("://", ":\\"), False),
    "mysql -p": (("mysql",), False),
    "curl -u": (("curl",), False),
    "sshpass -p": (("sshpass",), False),
    "SQL IDENTIFIED BY": (("identified",), True),
    "SQL IDENTIFIED BY pw": (("identified",), True),
    "SQL PASSWORD": (("password",), True),
    "SQL SET PASSWORD": (("password",), True),
    "netrc password": (("password",), False),
    "an Authorization header": (("authorization",), True),
    "a bearer token": (("bearer", "basic", "token", "digest"), True),
}


def may_hold(rule: str, text: str) -> bool:
    """Whether `text` holds one of the needles of `rule` (a kind of `SHAPES`, or a name of the
    other rules)."""
    needles, folded = NEEDLES[rule]
    if folded:
        if (
            not text.isascii() and rule in _unicode_folded()
        ):  # IGNORECASE also takes ı, İ and ſ for i and s: search it
            return True
        text = _lowered(text)
    return any(needle in text for needle in needles)


_LOWERED: list[tuple[str, str]] = [
    ("", "")
]  # the last text lowercased: a scrub asks for it once a folded rule


def _lowered(text: str) -> str:
    last = _LOWERED[0]
    if last[0] is text:
        return last[1]
    lowered = text.lower()
    _LOWERED[0] = (text, lowered)
    return lowered


def _shapes_in(text: str) -> Iterator[tuple[str, _Lazy]]:
    return ((kind, pattern) for kind, pattern in SHAPES if may_hold(kind, text))


_QUOTED = r"\"(?:[^\"\\\n]|\\.)*\"|'(?:[^'\\\n]|\\.)*'"
# A quoted SQL string's text (the quotes are not in it): `'it''s'`, `'a\'b'`, `"pw"`.
_SQL_QUOTED = r"""(?:(?<=')(?:\\.|''|[^'\\\n])+(?=')|(?<=")(?:\\.|""|[^"\\\n])+(?="))"""
# A Postgres dollar-quoted string's text: `$$it's$$` (the dollars are not in it).
_DOLLAR_QUOTED = r"(?<=\$\$)(?:(?!\$\$)[^\n])+(?=\$\$)"
# A command's or a statement's own password spelling (the value is group 2): `mysql -pPASS`, `curl
# -u user:PASS`, `sshpass -p PASS`; SQL's `IDENTIFIED BY 'PASS'` (CREATE/ALTER USER, GRANT;
# `IDENTIFIED WITH plugin BY`, `BY PASSWORD '*hash'`), bare `IDENTIFIED BY PASS` only in a
# CREATE/ALTER USER or CONNECT TO (not "identified by the model"), Postgres' `PASSWORD 'PASS'`
# (CREATE/ALTER ROLE or USER, single quotes: SQL's string literal) and its dollar-quoted `PASSWORD
# $$PASS$$`, MySQL's `SET PASSWORD [FOR user] = 'PASS'` (or `= PASSWORD('PASS')`); a netrc's
# `machine HOST [login USER] password PASS` (`default login USER password PASS`; HOST a host name,
# with a `.` or `:` or `localhost`, where no `login` follows it: not "machine learning password
# policy"), and in its form of a line each, a line that is only `password PASS` or `login USER
# password PASS` (not "password reset required").
COMMAND_PASSWORDS: tuple[tuple[str, _Lazy], ...] = (
    ("mysql -p", _Lazy(r"(\bmysql(?:dump|admin)?\b[^\n|;&]{0,512}?\s-p)([^\s'\"]+)")),
    (
        "curl -u",
        _Lazy(r"(\bcurl\b[^\n|;&]*?\s(?:-u|--user)(?:\s+|=)['\"]?[^\s:'\"]+:)([^\s'\"]+)"),
    ),
    ("sshpass -p", _Lazy(r"(\bsshpass\s+(?:-[A-Za-z]\s+)*-p\s*)([^\s'\"]+)")),
    (
        "SQL IDENTIFIED BY",
        _Lazy(
            r"(?ai)(\bidentified\s+(?:with\s+[\w'\"]+\s+)?by\s+(?:password\s+|values\s+)?['\"])("
            + _SQL_QUOTED
            + r")"
        ),
    ),
    (
        "SQL IDENTIFIED BY pw",
        _Lazy(
            r"(?ai)(\b(?:(?:create|alter)\s+user|connect\s+to)\s[^;\n]{0,200}?\bidentified\s+"
            r"by\s+)(?!(?:password|values|random)\b)([^\s'\";,()]+)"
        ),
    ),
    (
        "SQL PASSWORD",
        _Lazy(r"(?ai)(\bpassword\s+(?:'|\$\$))(" + _SQL_QUOTED + "|" + _DOLLAR_QUOTED + r")"),
    ),
    (
        "SQL SET PASSWORD",
        _Lazy(
            r"(?ai)(\bset\s+password\s+(?:for\s+[^=;\n]{1,200}?\s*)?=\s*(?:password\s*\(\s*)?"
            r"['\"])(" + _SQL_QUOTED + r")"
        ),
    ),
    (
        "netrc password",
        _Lazy(
            r"(?m)((?:\bmachine[ \t]+(?:\S+(?=[ \t]+(?:login|account|port)[ \t])|\S*[.:]\S*|"
            r"localhost)|\bdefault(?=[ \t]+(?:login|account)[ \t]))"
            r"(?:[ \t]+(?:login|account|port)[ \t]+\S+)*[ \t]+password[ \t]+|"
            r"^[ \t]*(?:login[ \t]+\S+[ \t]+)?password[ \t]+(?=(?:" + _QUOTED + r"|\S+)[ \t\r]*$))"
            r"(" + _QUOTED + r"|\S+)"
        ),
    ),
)
# user:password@ in a URL: everything between `scheme://` and the LAST `@` that is followed by a
# host name (so a password holding `@` or `/` is cut whole). Also where JSON escaped the slashes
# (`https:\/\/u:p@h\/x`, as PHP, Java and some loggers write it) or a repr() escaped those again,
# before an escaped quote (`h\"`), and where JSON escaped the `@` itself (`u:p\u0040h`, as an
# ASCII-only encoder may).
URL_USERINFO = _Lazy(
    r"(?i)\b([a-z][a-z0-9+.-]*:(?://|\\/\\/|\\\\/\\\\/))([^\s\"'<>]{0,512})(@|\\u0040)"
    r"(?=[A-Za-z0-9\[]"
    r"[A-Za-z0-9.:\[\]-]*(?:[/?#\s\"'<>,;)\\|}`]|$))"
)
_AUTH_HEADER = _Lazy(
    r"(?i)(\b(?:proxy-)?authorization\b[\"']?\s*[:=]\s*[\"']?)((?:[A-Za-z][\w.-]*\s+)?"
    r"[^\s\"']+)"
)
# `Bearer <token>`: 16 characters or more, one of them a digit, +, / or =; also a shorter `Basic`
# credential (a word of base64's shape after `Basic` alone), but only one that decodes to a
# printable `user:password` (`_is_bearer_token`): not "basic test", not "Basic QUJD".
_BEARER = _Lazy(
    r"(?i)(\b(?:bearer|token|digest|(?P<basic>basic))\s+)(?P<value>(?P<long>(?=[^\s]*[0-9+/=])"
    r"[A-Za-z0-9._~+/=-]{16,})|(?(basic)(?:[A-Za-z0-9+/]{4})+(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?"
    r"(?![\w+/=.~-])|(?!)))"
)
# --password VALUE, --hf-token=VALUE
_FLAG_HEAD = r"(?<![\w-])(?P<name>--?[A-Za-z][A-Za-z0-9_.-]*)(?P<sep>=|\s+)"
_FLAG = _Lazy(_FLAG_HEAD + r"(?P<value>" + _QUOTED + r"|[^\s\"'-][^\s\"']*|-[^\s\"'-][^\s\"']*)")
# name=value, name: value, "name": "value", 'name' = 'value': the value up to white space, or its
# closing quote. No match starts right after a letter or `_`: one starting a letter earlier would
# be found first anyway, and each start inside a long word scanned the rest of it: quadratic in
# the word's length.
_ASSIGNED_HEAD = r"(?<![A-Za-z_])(?P<name>[A-Za-z_][A-Za-z0-9_.-]*)(?P<sep>['\"]?\s*(?:=>|[=:])\s*)"
_ASSIGNED = _Lazy(_ASSIGNED_HEAD + r"(?P<value>" + _QUOTED + r"|[^\s\"'{\[(]\S*)")


@functools.cache
def _unicode_folded() -> frozenset[str]:
    """The folded rules whose pattern folds case as Unicode does (IGNORECASE without ASCII):
    `may_hold` searches them in any text that is not ASCII. For a pattern that folds ASCII letters
    only (`(?ai)`), or spells out the cases it takes (the AWS key id's), its needles in the
    lowercased text are enough. Read from the compiled patterns, when a text that is not ASCII first
    asks."""
    return frozenset(
        name
        for name, pattern in (
            *SHAPES,
            *COMMAND_PASSWORDS,
            ("an Authorization header", _AUTH_HEADER),
            ("a bearer token", _BEARER),
            ("a URL's userinfo", URL_USERINFO),
        )
        if NEEDLES[name][1] and pattern.flags & re.IGNORECASE and not pattern.flags & re.ASCII
    )


def _is_basic_credential(value: str) -> bool:
    """Whether `value` is base64 of a printable `user:password` (what follows `Basic` in a
    header)."""
    try:
        decoded = base64.b64decode(value, validate=True).decode("ascii")
    except ValueError:  # binascii.Error and UnicodeDecodeError are ValueErrors
        return False
    return decoded.isprintable() and 0 <= decoded.find(":") < len(decoded) - 1


def _is_bearer_token(match: re.Match) -> bool:
    return bool(
        match.group("long") or match.group("basic") and _is_basic_credential(match.group("value"))
    )


def _bearer_tokens(text: str) -> Iterator[re.Match]:
    """The matches of `_BEARER` in `text` that are a credential (`Bearer <token>`, `Basic
    <user:password>`)."""
    return (
        (m for m in _BEARER.finditer(text) if _is_bearer_token(m))
        if may_hold("a bearer token", text)
        else iter(())
    )


def _command_passwords(text: str) -> Iterator[tuple[str, re.Match]]:
    """(rule, match) of every command's or statement's password in `text` (a `<redacted>` one is
    none)."""
    return (
        (rule, m)
        for rule, pattern in COMMAND_PASSWORDS
        if may_hold(rule, text)
        for m in pattern.finditer(text)
        if _unquoted(m.group(2)) != REDACTED
    )


def _unquoted(value: str) -> str:
    return value[1:-1] if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'" else value


def _named(pattern: _Lazy, text: str) -> Iterator[re.Match]:
    """The matches of `_FLAG` or `_ASSIGNED` in `text` whose name is a credential's and whose value
    could be one. A pair under another name does not swallow what follows it: the search goes on
    from its value, so `printed: password => X` and `Protocol=https;AccountKey=X` find the
    credential's pair inside the value. Only a pair's name and separator are searched for
    (`_HEADS`); its value is read only under a credential's name: a long line of `a:a:a:...` or
    `https://https://...` is one pass, not a scan to its end per pair."""
    head, pos = _HEADS[pattern], 0
    while (found := head.search(text, pos)) is not None:
        pos = found.end()
        if not looks_secret(found.group("name")):
            continue
        match = pattern.match(text, found.start())
        if (
            match is not None
            and match.group("name") == found.group("name")
            and could_be_credential(_unquoted(match.group("value")), numbers=True)
        ):
            yield match
            pos = match.end()


_HEADS = {_FLAG: _Lazy(_FLAG_HEAD), _ASSIGNED: _Lazy(_ASSIGNED_HEAD)}


def url_secrets(text: str) -> list[str]:
    """The user:password parts of every URL in `text` (and the password alone)."""
    out: list[str] = []
    if not may_hold("a URL's userinfo", text):
        return out
    for match in URL_USERINFO.finditer(text):
        info = match.group(2)
        if info:
            out.append(info)
            if ":" in info:
                out.append(info.split(":", 1)[1])
    return out


def credential_in_text(text: str) -> str | None:
    """What credential the text `text` holds ("a GitHub token", "a value after --db-password"), or
    None.

    The same patterns `Redactor.text` cuts: a text it would change holds a credential.
    """
    for kind, pattern in _shapes_in(text):
        if pattern.search(text):
            return kind
    for match in URL_USERINFO.finditer(text) if may_hold("a URL's userinfo", text) else ():
        if ":" in match.group(2) or any(
            p.search(match.group(2)) for _, p in _shapes_in(match.group(2))
        ):
            return "a URL with a password in it (user:password@host)"
    if (may_hold("an Authorization header", text) and _AUTH_HEADER.search(text)) or next(
        _bearer_tokens(text), None
    ):
        return "an Authorization header's credential"
    for rule, _ in _command_passwords(text):
        return f"a command's or statement's password ({rule})"
    for match in _named(_FLAG, text):
        if could_be_credential(_unquoted(match.group("value"))):
            return f"a value after {match.group('name')}"
    for match in _named(_ASSIGNED, text):
        if could_be_credential(_unquoted(match.group("value"))):
            return f"a value given to {match.group('name')}"
    return None


def credentials_in(
    value: Any, path: tuple[Any, ...] = (), under_secret: str | None = None
) -> Iterator[tuple[tuple[Any, ...], str]]:
    """(path, what) of every credential in nested data: a text under a credential's name that could
    be one, or a text of a credential's shape anywhere (mapping keys included). The value itself is
    never yielded."""
    if isinstance(value, Mapping):
        for k, v in value.items():
            if isinstance(k, str) and credential_in_text(k):
                yield (*path, k), f"a key holding {credential_in_text(k)}"
            name = under_secret or (str(k) if looks_secret(str(k)) else None)
            yield from credentials_in(v, (*path, k), name)
    elif isinstance(value, list | tuple):
        for i, v in enumerate(value):
            yield from credentials_in(v, (*path, i), under_secret)
    elif isinstance(value, str):
        if under_secret is not None and could_be_credential(value):
            yield path, f"a value under the credential name {under_secret!r}"
        else:
            found = credential_in_text(value)
            if found is not None:
                yield path, found


def secret_values(value: Any, under_secret: bool = False) -> list[str]:
    """Every credential's text in nested data (what `credentials_in` finds), to be cut out of free
    text."""
    out: list[str] = []
    if isinstance(value, Mapping):
        for k, v in value.items():
            out += secret_values(v, under_secret or looks_secret(str(k)))
    elif isinstance(value, list | tuple):
        for v in value:
            out += secret_values(v, under_secret)
    elif isinstance(value, str):
        if under_secret and could_be_credential(value):
            out.append(value)
        out += credential_texts(value)
    return out


def credential_texts(text: str) -> list[str]:
    """The credentials themselves in free text `text`: shapes, URL userinfo, values of credential
    flags and pairs."""
    out = url_secrets(text) + [
        m.group(0) for _, pattern in _shapes_in(text) for m in pattern.finditer(text)
    ]
    out += [m.group(2) for _, m in _command_passwords(text)]
    for pattern in (_FLAG, _ASSIGNED):
        out += [_unquoted(match.group("value")) for match in _named(pattern, text)]
    return out


@functools.lru_cache(maxsize=4096)  # every trial's Redactor reads the same environment's names
def _env_name_is_secret(name: str) -> bool:
    """A variable whose value is cut from free text: a credential's name, or one with such a word
    anywhere."""
    words = _words(name)
    return name not in _NOT_SECRETS and (
        looks_secret(name)
        or any(w in NOUNS or w in ("pass", "key", "pat") and i > 0 for i, w in enumerate(words))
        or "connection_string" in "_".join(words)
    )


def env_secrets(environ: Mapping[str, str] | None = None) -> list[str]:
    """Values of environment variables with credential-like names, and the user:password of URLs in
    any."""
    environ = os.environ if environ is None else environ
    out = [v for k, v in environ.items() if v and _env_name_is_secret(k)]
    for v in environ.values():
        out += url_secrets(v)
    return out


def _spellings(value: str) -> list[str]:
    """A secret as printed: itself (also lowercased and uppercased), escaped as repr() and JSON
    write it, its UTF-8 bytes in hex (both cases) and in base64 (standard and URL-safe, with and
    without padding). Base64 also as it reads inside a longer encoded text (`user:secret` of a
    Basic credential, a config's JSON): for each of the three offsets the secret can start at, the
    characters that encode its bytes alone; such a part shorter than `_MIN_ENCODED` is left out."""
    out = [
        value,
        repr(value)[1:-1],
        json.dumps(value)[1:-1],
        json.dumps(value, ensure_ascii=False)[1:-1],
        value.lower(),
        value.upper(),
    ]  # a log that prints it folded (`{token.lower()}`, a case-blind id)
    raw = value.encode("utf-8", "surrogatepass")
    out += [raw.hex(), raw.hex().upper()]
    for encode in (base64.b64encode, base64.urlsafe_b64encode):
        whole = encode(raw).decode()
        out += [whole, whole.rstrip("=")]
        for offset, skip in (
            (0, 0),
            (1, 2),
            (2, 3),
        ):  # the leading characters that also encode what precedes
            part = encode(b"\0" * offset + raw).decode()[skip : (offset + len(raw)) // 3 * 4]
            if len(part) >= _MIN_ENCODED:
                out.append(part)
    return list(dict.fromkeys(out))


def _literal_union(words: Iterable[str]) -> re.Pattern[str]:
    """One pattern for any of `words` that takes the longest of those starting at one place, as
    `a|b|...` longest first does, written as a trie: a search tries each first character once a
    place, not each word, so the cost of a scrub grows with the text, not with the number of
    spellings the secrets have."""
    trie: dict[str, dict] = {}
    for word in words:
        node = trie
        for char in word:
            node = node.setdefault(char, {})
        node[""] = {}  # a word ends here

    def written(node: dict[str, dict]) -> str:
        out = []
        while len(node) == 1 and "" not in node:  # one way on: no group
            ((char, node),) = node.items()
            out.append(re.escape(char))
        ways = [re.escape(char) + written(node[char]) for char in sorted(node) if char]
        if ways:
            either = ways[0] if len(ways) == 1 else "(?:" + "|".join(ways) + ")"
            out.append(f"(?:{either})?" if "" in node else either)
        return "".join(out)

    return re.compile(written(trie))


_MEMO_LEN, _MEMO_SIZE = 256, 4096  # the texts `Redactor.scrub` remembers: how long, how many


class Redactor:
    """Cuts credentials out of free text (`text`), and out of the free text in records (`scrub`)."""

    # The values under these keys are what a trainable received: recorded exactly, never rewritten.
    VERBATIM = frozenset({"config", "params"})

    def __init__(self, values: Iterable[str] = ()):
        found = {s for v in values if len(v) >= MIN_SECRET_LEN for s in _spellings(v)}
        self.values = sorted(found, key=len, reverse=True)
        self._pattern = _literal_union(self.values) if self.values else None
        # a record's short texts (arm names, states, hashes, hosts) recur in every record: each is
        # cut once; bounded, since a run may write any number of distinct ones
        self._scrubbed: dict[str, str] = {}

    @classmethod
    def for_run(cls, *configs: Any, environ: Mapping[str, str] | None = None) -> Redactor:
        """The secrets of the environment (and of `configs`, which validation keeps free of any)."""
        values: list[str] = env_secrets(environ)
        for config in configs:
            values += secret_values(config)
        return cls(values)

    def text(self, value: str) -> str:
        """`value` with every known secret, credential shape, URL userinfo, Authorization value,
        credential flag and `credential_name=value` cut out."""
        if self._pattern is not None:
            value = self._pattern.sub(REDACTED, value)
        for kind, pattern in SHAPES:
            if may_hold(kind, value):
                value = pattern.sub(REDACTED, value)
        if may_hold("a URL's userinfo", value):
            value = URL_USERINFO.sub(
                lambda m: m.group(1) + (REDACTED if m.group(2) else "") + m.group(3), value
            )
        if may_hold("an Authorization header", value):
            value = _AUTH_HEADER.sub(
                lambda m: m.group(1) + REDACTED if m.group(2) != REDACTED else m.group(0), value
            )
        if may_hold("a bearer token", value):
            value = _BEARER.sub(
                lambda m: m.group(1) + REDACTED if _is_bearer_token(m) else m.group(0), value
            )
        for rule, pattern in COMMAND_PASSWORDS:
            if may_hold(rule, value):
                value = pattern.sub(
                    lambda m: (
                        m.group(0) if _unquoted(m.group(2)) == REDACTED else m.group(1) + REDACTED
                    ),
                    value,
                )
        if "-" in value:
            value = self._cut_named(_FLAG, value)
        if "=" in value or ":" in value:
            value = self._cut_named(_ASSIGNED, value)
        return value

    @staticmethod
    def _cut_named(pattern: _Lazy, text: str) -> str:
        """`text` with the value of every credential's pair or flag (`_named`) cut, its quotes
        kept."""
        out, last = [], 0
        for m in _named(pattern, text):
            raw = m.group("value")
            quote = (
                raw[0] if raw[:1] in ("'", '"') and raw.endswith(raw[0]) and len(raw) > 1 else ""
            )
            out += [text[last : m.start("value")], quote, REDACTED, quote]
            last = m.end()
        return "".join(out) + text[last:]

    def stream(self) -> StreamScrubber:
        """A scrubber for output that arrives in pieces: a secret split across writes is still
        cut."""
        return StreamScrubber(self)

    def scrub(self, value: Any) -> Any:
        """The free text of a record (messages, tracebacks) scrubbed; `config` and `params` kept
        exactly."""
        if isinstance(value, Mapping):
            return {k: v if k in self.VERBATIM else self.scrub(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self.scrub(v) for v in value]
        if isinstance(value, str):
            return self._short_text(value) if len(value) <= _MEMO_LEN else self.text(value)
        return value

    def _short_text(self, value: str) -> str:
        out = self._scrubbed.get(value)
        if out is None:
            if len(self._scrubbed) >= _MEMO_SIZE:
                self._scrubbed.clear()
            out = self._scrubbed[value] = self.text(value)
        return out


class StreamScrubber:
    """Scrubs text written in pieces (a secret printed in two parts, or one character at a time).

    Text is held until a line ends; a whole line is scrubbed and let through. A line longer than
    HOLD characters is let through in parts, each cut where no known secret (and no URL) straddles
    it. `flush()` scrubs and returns what is held (call it at the end).
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
        cut = len(self.pending) - max(
            longest, 256
        )  # 256: room for a URL's userinfo or a `name=value`
        for match in re.finditer(r"\s", self.pending[cut - 4096 if cut > 4096 else 0 : cut][::-1]):
            cut -= match.start()
            break
        return max(cut, 0)

    def flush(self) -> str:
        out, self.pending = self.pending, ""
        return self.redactor.text(out) if out else ""


class ScrubbedStream:
    """A text stream (the terminal): every write goes through a Redactor, then `terminal_safe`.

    Each write is scrubbed on its own (nothing is held: live progress stays live); `plan` wraps
    its standard output and error in one, so no command prints a secret it read, nor a control
    character a name, a value or a message carried (shown as `\\x1b`). `for_drawing` is the same
    stream for a writer whose own escape sequences are meant (rich's live table), which made what
    it draws safe itself.
    """

    def __init__(self, stream: Any, redactor: Redactor, *, safe: bool = True):
        self._stream = stream
        self._redactor = redactor
        self._safe = safe

    def write(self, text: str) -> int:
        if isinstance(text, str):
            shown = self._redactor.text(text)
            self._stream.write(terminal_safe(shown) if self._safe else shown)
        else:
            self._stream.write(text)
        return len(text)

    def for_drawing(self) -> ScrubbedStream:
        return ScrubbedStream(self._stream, self._redactor, safe=False)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)
