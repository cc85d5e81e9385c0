"""What counts as a secret: credential-like names are, the shell's working folder is not."""
# ruff: noqa: E501 (the scripts and data these tests write keep their own long lines)

import json

import pytest

from planner._core.redact import Redactor, looks_secret
from tests._scaling import growth


def test_credential_names_look_secret():
    for name in (
        "API_TOKEN",
        "db_password",
        "apiKey",
        "AWS_SECRET_ACCESS_KEY",
        "MLFLOW_TRACKING_PASSWORD",
    ):
        assert looks_secret(name), name


def test_the_working_folder_is_not_a_secret():
    """PWD matched the 'pwd' abbreviation of password, and every path in identity.json became
    <redacted>."""
    assert not looks_secret("PWD") and not looks_secret("OLDPWD")
    redactor = Redactor.for_run(environ={"PWD": "/home/me/project", "API_TOKEN": "s3cr3t-value"})
    assert redactor.text("/home/me/project/train.py") == "/home/me/project/train.py"
    assert redactor.text("token=s3cr3t-value") == "token=<redacted>"


# The credential forms P230 and the scrubber missed (review c05): each is one rule both read.
MISSED = {
    "Azure connection string": "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=Zm9vYmFyLEAKMARK1MjM0NTY3ODkw==;"
    "EndpointSuffix=core.windows.net",
    "Azure SAS URL": "https://acct.blob.core.windows.net/c?sv=2022-11-02&sp=r&sig=AbCdEfLEAKMARKMnOpQrStUvWx%3D",
    "scheme-less user:password@host": "svc:S3cretLEAKMARK@db.internal:5432/x",
    "GitLab token": "glpat-LEAKMARK3abcdefghij",
    "PyPI token": "pypi-AgEIcHlwaS5vcmcLEAKMARKE0ZTk2MWQtZjY3",
    "Google API key": "AIzaSyA1b2C3d4E5f6G7h8I9j0KlLEAKMARKtUvW",
    "npm token": "npm_AbCdEfGhIjKlMnOpQrStLEAKMARKYz0123456789",
    "mysql -pPASS": "mysql -uroot -pHunter2LEAKMARK db",
    "curl -u user:pass": "curl -u admin:Hunter2LEAKMARK https://host/",
    "sshpass -p": "sshpass -p Hunter2LEAKMARK ssh host",
    "password => X": "password => Hunter2LEAKMARK",
}
# The forms an attacker-style probe found still missed (each one rule of planner/_core/redact.py,
# both read).
MISSED_PROBE = {
    "URL with JSON-escaped slashes": '{"url": '
    '"https:\\/\\/user:s3cretLEAKMARK@db.example.com\\/x"}',
    "URL with JSON-escaped slashes, repr'd": "'https:\\\\/\\\\/user:s3cretLEAKMARK@db.example.com'",
    "URL before an escaped quote": '{\\"url\\": \\"https://user:s3cretLEAKMARK@db.example.com\\"}',
    "URL with a JSON-escaped @": '{"url": "https://user:s3cretLEAKMARK\\u0040db.example.com/x"}',
    "lowercased AWS access key id": "https://logs.example.com/q?key=akialeakmark2abcdefg&x=1",
    "SQL IDENTIFIED BY 'pw'": "CREATE USER 'app'@'%' IDENTIFIED BY 'Hunter2LEAKMARK';",
    "MySQL SET PASSWORD FOR": "SET PASSWORD FOR 'app'@'localhost' = 'Hunter2LEAKMARK';",
    "MySQL SET PASSWORD": "set password = 'Hunter2 LEAKMARK'",
    "MySQL SET PASSWORD = PASSWORD()": "SET PASSWORD FOR app = PASSWORD('Hunter2LEAKMARK')",
    "Postgres PASSWORD $$pw$$": "ALTER ROLE app WITH LOGIN PASSWORD $$Hun'ter2LEAKMARK$$;",
    'SQL IDENTIFIED BY "pw"': 'ALTER USER app IDENTIFIED BY "Hun\'ter2 LEAKMARK";',
    "SQL IDENTIFIED WITH plugin BY 'pw'": "ALTER USER 'app'@'h' IDENTIFIED WITH "
    "caching_sha2_password BY 'it''sLEAKMARK'",
    "SQL GRANT ... IDENTIFIED BY": "GRANT ALL ON db.* TO 'app'@'h' IDENTIFIED BY 'Hunter2LEAKMARK'",
    "SQL IDENTIFIED BY PASSWORD 'hash'": "IDENTIFIED BY PASSWORD "
    "'*94BDCEBE19083CE2A1F959FD02F964C7AFLEAKMARK'",
    "Oracle IDENTIFIED BY pw": "create user scott identified by Tiger2LEAKMARK default tablespace "
    "users",
    "Oracle CONNECT TO ... IDENTIFIED BY pw": "CREATE DATABASE LINK l CONNECT TO scott IDENTIFIED "
    "BY Tiger2LEAKMARK USING 'x'",
    "Postgres PASSWORD 'pw'": "CREATE ROLE app WITH LOGIN PASSWORD 'Hunter2LEAKMARK' VALID UNTIL "
    "'infinity';",
    "Postgres ENCRYPTED PASSWORD": "alter user app with encrypted password 'md5LEAKMARK0123'",
    "netrc line": "machine api.example.com login bob password Hunter2LEAKMARK",
    "netrc line, password first": "machine localhost password Hunter2LEAKMARK login bob",
    "netrc default": "default login anonymous password LEAKMARK@example.com",
}


def test_each_missed_credential_form_is_cut_from_free_text_and_refused_in_a_contract():
    from planner._core.redact import credential_in_text, credentials_in

    for kind, text in {**MISSED, **MISSED_PROBE}.items():
        out = Redactor().text(f"printed: {text} end")
        assert "leakmark" not in out.lower() and "<redacted>" in out and out.endswith(" end"), (
            kind,
            out,
        )
        assert Redactor().text(out) == out, (
            kind,
            out,
        )  # what it cut is cut, and no credential any more
        assert credential_in_text(out) is None, (kind, out)
        assert credential_in_text(text) is not None, kind
        assert list(credentials_in({"config": {"x": text}})), kind
    assert (
        Redactor()
        .text("AccountName=acct;AccountKey=Zm9vYmFyLEAKMARK1MjM0NTY3ODkw==")
        .startswith("AccountName=acct;")
    )
    assert list(credentials_in({"db": {"pw": "Adm1nPw-longenough"}})) and looks_secret("db.pw")


def test_credential_names_of_the_environment_are_cut_when_printed():
    env = {
        "AZURE_STORAGE_CONNECTION_STRING": "Endpoint=sb://x/;Opaque=LEAKMARKconnvalue",
        "ADMIN_PW": "Adm1n-LEAKMARK2-pw",
        "CI_REGISTRY_PAT": "LEAKMARK3plainvalue",
    }
    out = Redactor.for_run(environ=env).text(" ".join(env.values()))
    assert "LEAKMARK" not in out, out


def test_ordinary_ml_text_is_no_credential():
    from planner._core.redact import credential_in_text

    for text in (
        "p-value 0.01",
        "lr=3e-4",
        "image: nvcr.io/nvidia/pytorch:24.01-py3",
        "repo/name:1.0@sha256:abc.def",
        "git@github.com:org/repo.git",
        "user@example.com",
        "at 12:30@home.x",
        "python -u train.py:main",
        "sig=0.05",
        "kl_weight => 0.5",
        "pw_norm: l2",
        "s3://bucket/key",
        "mysql -h host db",
        "entity/project:v1@latest.x",
        "curl -u admin https://h/",
        # near the probe's forms: prose, digests, ids and paths, never a credential
        "sha256:" + "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
        "run 3f2a9c1e7b4d",
        "trial_5e3c2a1b0f",
        "commit 4b825dc642cb6eb9a060e54bf8d69288fbee4904",
        "https:\\/\\/example.com\\/x",
        "C:\\Users\\me:\\x",
        "asiancuisinedatasets",
        "asiasoutheast1bucket",
        "aidapipelinev2stage3x",
        "AKIA",
        "akia2345",
        "the outliers identified by the model",
        "Samples IDENTIFIED BY THE MODEL: 12",
        "identified by 3 votes",
        "a user identified by the model",
        "enter your password",
        "Enter your password: ",
        "set password = ",
        "the password $$ cost",
        "password reset required",
        "Password required",
        "the password is wrong",
        "machine learning",
        "machine learning password policy",
        "machine learning models",
        "default password policy",
        "basic test",
        "Basic QUJD",
        "basic statistics",
    ):
        assert Redactor().text(text) == text and credential_in_text(text) is None, text
    assert not looks_secret("pw_norm") and not looks_secret("max_tokens")


def test_every_rule_has_needles_and_a_text_a_rule_matches_holds_one():
    """The scrubber searches a rule only where one of its needles occurs: a needle a pattern can
    match without would let that credential through. Random texts built from the rules' own pieces,
    and each kind's sample."""
    import random

    from planner._core import redact

    rules = [
        *redact.SHAPES,
        *redact.COMMAND_PASSWORDS,
        ("an Authorization header", redact._AUTH_HEADER),
        ("a bearer token", redact._BEARER),
        ("a URL's userinfo", redact.URL_USERINFO),
    ]
    assert {name for name, _ in rules} == set(redact.NEEDLES)
    pieces = [
        "-----BEGIN RSA PRIVATE KEY-----",
        "-----END RSA PRIVATE KEY-----",
        "https://hooks.slack.com/services/",
        "eyJ",
        "hf_",
        "sk-",
        "sk_",
        "ghp_",
        "github_pat_",
        "AKIA",
        "ASIA",
        "xoxb-",
        "glpat-",
        "pypi-AgE",
        "npm_",
        "AIza",
        "AccountKey=",
        "SharedAccessKey=",
        "?sig=",
        "&SIG=",
        "svc:",
        "@db.internal",
        "mysql",
        " -p",
        "curl",
        " -u ",
        "sshpass",
        "Authorization: ",
        "PROXY-AUTHORIZATION=",
        "Bearer ",
        "Basic ",
        "TOKEN ",
        "digest ",
        "=",
        ":",
        "@",
        "/",
        " ",
        "\n",
        '"',
        "'",
        "a",
        "Z",
        "0",
        "9",
        "_",
        "-",
        "+",
        "%",
        "abcdefghijklmnopqrstuvwxyzABCDEF0123456789",
        "ı",
        "İ",
        "ſ",
        "K",
        "authorızation: ",
        "baſic ",
        "dıgest ",
        "&ſig=",
        "ſharedAccessKey=",
        "https://",
        "https:\\/\\/",
        "s3:\\\\/\\\\/",
        "\\",
        ":\\/",
        "u:p@h.x",
        "akia",
        "asia",
        "aroa",
        "2",
        "7",
        "abcdefghijklmnop",
        "abcdefghijklmn27",
        "ABCDEFGHIJKLMN27",
        "IDENTIFIED ",
        "identified with x ",
        " BY ",
        "by ",
        "identified by ",
        "x ",
        "IDENTIFIED BY '",
        "pw'",
        "password ",
        "PASSWORD '",
        "create user ",
        "ALTER USER ",
        "connect to ",
        "ıdentıfıed by '",
        "paſſword '",
        "machine ",
        "machine h.x ",
        "localhost ",
        " login ",
        "default ",
        " account ",
        "dTpzZWNyZXQ=",
        "basic ",
    ]
    rng = random.Random(7)
    texts = [
        *MISSED.values(),
        "hf_abcdefghijklmnop",
        "sk-abcdefghijklmnop",
        "ghp_abcdefghijklmnopqrst",
        "AKIAABCDEFGHIJKLMNOP",
        "xoxb-1234567890-abc",
        "Authorization: Bearer abcdefghijklmnop1",
        "-----BEGIN PRIVATE KEY-----\nMII",
        "eyJhbGciOi.eyJzdWIiOi.abcdefghij",
        *MISSED_PROBE.values(),
        "password Hunter2\n",
        "login u password Hunter2",
        "Basic dTpzZWNyZXQ=",
    ]
    texts += ["".join(rng.choice(pieces) for _ in range(rng.randint(1, 12))) for _ in range(20_000)]
    for text in texts:
        for name, pattern in rules:
            if pattern.search(text):
                assert redact.may_hold(name, text), (name, text)


def test_letters_that_ignorecase_folds_to_i_and_s_do_not_hide_a_credential():
    """re.IGNORECASE matches ı and İ to i and ſ to s, which str.lower() does not: a folded rule's
    needles are not looked for in a text that is not ASCII (review of the needles)."""
    from planner._core.redact import credential_in_text

    for text in (
        "authorızation: xyzsecretLEAKMARK",
        "Authorİzation: xyzsecretLEAKMARK",
        "baſic QWxhZGRpbjpvcGVuLEAKMARKZQ==",
        "header dıgest abcdefghijLEAKMARK1234=",
        "https://a.blob.core.windows.net/c?sp=r&ſig=abcdefghijklmnLEAKMARK%3D",
    ):
        assert "LEAKMARK" not in Redactor().text(text), text
        assert credential_in_text(text) is not None, text


def test_a_long_word_before_a_colon_is_scrubbed_in_linear_time():
    line = "x" * 65536 + ": 1\n"
    assert Redactor().text(line) == line
    grows = growth(lambda n: lambda: Redactor().text("x" * n + ": 1\n"), 65536)
    assert grows < 8, (
        f"4x the word took {grows:.0f}x the time: the name=value rule scans every suffix"
    )


def test_encoded_copies_of_an_environment_secret_are_cut():
    """A trial printing base64.b64encode(secret) or secret.encode().hex() printed the secret: only
    its own spellings (and repr/JSON) were searched. Now its base64 (standard, URL-safe, with and
    without padding, also inside a longer encoded text such as a Basic credential's user:secret)
    and hex (both cases) are cut too."""
    import base64

    from planner._core.redact import MIN_SECRET_LEN

    secret = "s3cr3t+/Pass~w0rd?"  # + / ~ ? make the standard and URL-safe base64 differ
    redactor = Redactor.for_run(environ={"DB_PASSWORD": secret})
    raw = secret.encode()
    for encode in (base64.b64encode, base64.urlsafe_b64encode):
        for text in (encode(raw).decode(), encode(raw).decode().rstrip("=")):
            assert redactor.text(f"x {text} y") == "x <redacted> y", text
    assert redactor.text(f"x {raw.hex()} {raw.hex().upper()} y") == "x <redacted> <redacted> y"
    assert (
        redactor.text(f"x {secret.lower()} {secret.upper()} y") == "x <redacted> <redacted> y"
    )  # printed folded
    for before in (
        "u:",
        "us:",
        "usr:",
        '{"db": {"password": "',
    ):  # each of the three offsets in base64
        for encode in (base64.b64encode, base64.urlsafe_b64encode):
            text = encode((before + secret + '"}').encode()).decode()
            out = redactor.text(f"Authorization: Basic {text}")
            assert out == "Authorization: <redacted>", out  # the header rule
            out = redactor.text(f"auth {text}")  # no rule but the secret's own spellings
            assert (
                "<redacted>" in out
                and len(out) - len("<redacted>") <= len(f"auth {text}") - len(secret) * 4 // 3 + 4
            ), out
    short = "a1b2c"
    assert (
        len(short) < MIN_SECRET_LEN
        and Redactor.for_run(environ={"DB_PASSWORD": short}).text(
            base64.b64encode(short.encode()).decode() + " " + short.encode().hex()
        )
        == "YTFiMmM= 6131623263"
    )
    # hex ids and digests that are no copy of the secret are kept
    for text in (
        "sha256:" + "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
        "run 3f2a9c1e7b4d",
        "image@sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        "cGFzc3dvcmQ=",
    ):
        assert redactor.text(text) == text, text


def test_the_secrets_pattern_takes_the_longest_spelling_as_the_alternation_did():
    """The secrets' spellings are searched as one trie-shaped pattern (faster than `a|b|...` with
    40 of them): it must cut what the alternation of them, longest first, cut."""
    import random
    import re

    from planner._core.redact import _literal_union

    rng = random.Random(3)
    for _ in range(300):
        words = sorted(
            {
                "".join(rng.choice("ab+/\\.(") for _ in range(rng.randint(1, 7)))
                for _ in range(rng.randint(1, 9))
            },
            key=len,
            reverse=True,
        )
        text = "".join(rng.choice("ab+/\\.( ") for _ in range(60))
        alternation = re.compile("|".join(re.escape(w) for w in words))
        assert _literal_union(words).sub("<r>", text) == alternation.sub("<r>", text), (words, text)


def test_a_short_basic_credential_is_cut_and_basic_words_are_not():
    """`Basic <base64 of user:password>` was cut only from 16 characters on (user:password of 12
    bytes); a shorter one is cut when it decodes to a printable user:password."""
    import base64

    from planner._core.redact import credential_in_text

    for pair in ("u:pw", "bob:hunter2", "a:b"):
        text = "Basic " + base64.b64encode(pair.encode()).decode()
        assert Redactor().text(f"sent {text} to h") == "sent Basic <redacted> to h", text
        assert credential_in_text(text) is not None, text
    for text in (
        "basic test",
        "Basic QUJD",
        "basic idea",
        "Basic dGVzdA==",
        "basic Og==",
    ):  # ABC, test, ':' alone
        assert Redactor().text(text) == text and credential_in_text(text) is None, text
    for text in (
        "token Bearer abcdefghijklmnop1",
        "basic test Bearer abcdefghijklmnop1",
    ):  # a word passed over
        assert Redactor().text(text) == text.replace("abcdefghijklmnop1", "<redacted>"), text


def test_a_netrc_file_printed_line_by_line_loses_its_passwords():
    """A .netrc of a line each (`machine h` / `login u` / `password X`) printed by a trial: the
    password's line reaches the scrubber alone, so a line that is only `password X` (or `login u
    password X`) is cut."""
    netrc = (
        "machine api.example.com\n  login bob\n  password Hunter2LEAKMARK\n"
        "machine h2.example.com\n  login alice password 'Quoted LEAKMARK'\r\n"
        "default login anonymous password LEAKMARK@example.com\n"
    )
    scrubber = Redactor().stream()
    out = "".join(scrubber.feed(ch) for ch in netrc) + scrubber.flush()
    assert "LEAKMARK" not in out and out.count("<redacted>") == 3, out
    assert out.startswith("machine api.example.com\n  login bob\n  password <redacted>\n"), out
    from planner._core.redact import credentials_in

    assert list(credentials_in({"netrc": netrc}))  # P230: a contract value holding a .netrc
    for line in ("password reset required\n", "  the password is: \n", "login bob\n", "password\n"):
        assert Redactor().text(line) == line, line


def test_sql_credentials_are_cut_and_refused_but_prose_identified_by_is_not():
    from planner._core.redact import credential_in_text

    sql = (
        "CREATE USER IF NOT EXISTS 'app'@'%' IDENTIFIED BY 'Hunter2LEAKMARK', 'b'@'%' "
        "IDENTIFIED BY 'x2LEAKMARK';"
    )
    assert (
        Redactor().text(sql)
        == "CREATE USER IF NOT EXISTS 'app'@'%' IDENTIFIED BY '<redacted>', 'b'@'%' "
        "IDENTIFIED BY '<redacted>';"
    )
    assert (
        Redactor().text("ALTER USER scott IDENTIFIED BY tiger2 REPLACE old")
        == "ALTER USER scott IDENTIFIED BY <redacted> REPLACE old"
    )
    assert (
        Redactor().text("CREATE USER x IDENTIFIED BY RANDOM PASSWORD")
        == "CREATE USER x IDENTIFIED BY RANDOM PASSWORD"
    )
    assert (
        credential_in_text("ALTER ROLE app PASSWORD '<redacted>'") is None
    )  # an already scrubbed line
    assert Redactor().text("ALTER ROLE app PASSWORD NULL") == "ALTER ROLE app PASSWORD NULL"


def test_the_statement_and_netrc_rules_scrub_a_long_line_in_linear_time():
    """`create user ` repeated before one `identified`: each start scanned the rest of the line for
    it."""
    for unit, tail, n in (
        ("create user ", "identified", 5000),
        ("machine ", "password", 8000),
        ("password '", "", 6000),
        ("identified by '", "", 4000),
        ("password ''", "", 5000),
        ("\n password ", "", 5000),
    ):
        grows = growth(lambda k, unit=unit, tail=tail: lambda: Redactor().text(unit * k + tail), n)
        assert grows < 8, f"{unit!r} x 4 took {grows:.0f}x the time"


def test_lines_of_repeated_pairs_urls_and_commands_are_scrubbed_in_linear_time():
    """Each `https:` of `https://https://...` (and each `a:` of `a:a:a:...`) is a name=value pair
    whose value ran to the end of the line, read again from each; the URL rule scanned to the
    line's end for an `@` from each scheme, and `mysql` for ` -p`: minutes for a 60 KiB line a
    trial printed. Values are read only under a credential's name now, and a URL's user info or a
    command's arguments are at most 512 characters."""
    for unit, tail, n in (
        ("https://", "@", 1875),
        ("a:", "", 7500),
        ("mysql ", "", 2500),
        ("--a ", "", 3750),
        ("x=https://", "", 1500),
    ):
        grows = growth(lambda k, unit=unit, tail=tail: lambda: Redactor().text(unit * k + tail), n)
        assert grows < 8, f"{unit!r} x 4 took {grows:.0f}x the time"
    # what the rules find is unchanged
    assert Redactor().text("url: https://https://x:secretpw@h.com/ password: hunter2xyz") == (
        "url: https://<redacted>@h.com/ password: <redacted>"
    )


def test_the_driver_redactor_changes_no_recorded_value():
    """Redactor.for_run(frozen, *configs) as the driver builds it: `scrub` keeps config and params
    as they are."""
    config = {"model": {"token_dropout": 0.1, "pad_token": "<pad>"}, "note": "max_token_length=5"}
    redactor = Redactor.for_run(config, environ={"HF_TOKEN": "hf_PLANTED4tokenxyz"})
    record = {
        "config": config,
        "params": {"model.token_dropout": 0.2},
        "errors": [{"message": "login as token=hf_PLANTED4tokenxyz failed"}],
    }
    scrubbed = redactor.scrub(record)
    assert scrubbed["config"] == config and scrubbed["params"] == record["params"]
    assert "PLANTED" not in json.dumps(scrubbed["errors"])
    assert redactor.scrub(config) == config


PRINTED = {
    "Authorization: Bearer <jwt>": "Authorization: Bearer "
    "eyJhbGciOiJIUzI1NiJ9.eyJQTEFOVEVEIjoxfQ.c2lnPLANTED",
    "Authorization: Basic <b64>": "Authorization: Basic dXNlcjpQTEFOVEVEcGFzcw==PLANTED",
    "Authorization: Token <x>": "authorization: Token PLANTEDabc123",
    "header in a dict repr": "{'Authorization': 'Digest PLANTED-abc'}",
    "--password V --token V": "run.py --password PLANTEDpw --token PLANTEDtok --api-key=PLANTEDkey",
    "--hf-token X --db-password Y": "python t.py --hf-token PLANTEDx --db-password PLANTEDy",
    "password=ab,CDEF": "password=ab,CDEF-PLANTED next",
    "name: value with punctuation": "db_password: 'ab;c}d PLANTED'",
    "a URL password holding @ and /": "postgres://svc:p@ss/w0rd-PLANTED@db.example/x",
    "ghp_ under an unknown name": "using ghp_PLANTEDabcdefghijklmnop now",
    "sk- under an unknown name": "key is sk-PLANTEDabcdefghijk",
    "hf_ under an unknown name": "hf_PLANTEDtokenabcdef",
    "AKIA under an unknown name": "id AKIAPLANTED123456789",
    "a Slack webhook": "posting to https://hooks.slack.com/services/T000/B000/PLANTEDxyz",
}


@pytest.mark.parametrize("text", list(PRINTED.values()), ids=list(PRINTED))
def test_free_text_loses_every_credential(text):
    assert "PLANTED" not in Redactor.for_run(environ={}).text(text)


def test_a_repr_escaped_environment_secret_is_cut():
    """A password with a quote or a backslash, printed through repr() or json.dumps, kept its
    escaped form."""
    secret = "it's\\PLANTED-pw"
    redactor = Redactor.for_run(environ={"DB_SECRET": secret})
    for shown in (repr({"x": secret}), json.dumps({"x": secret}), repr(secret)):
        assert "PLANTED" not in redactor.text(shown), shown


def test_ordinary_names_in_free_text_are_kept():
    text = (
        "max_tokens=5 pad_token_id: 0 model.token_dropout=0.1 skip_pass=3 pad_token: <pad> "
        "--token_dropout 0.2"
    )
    assert Redactor.for_run(environ={}).text(text) == text


def test_the_credential_refusals_hint_survives_the_terminals_scrubber():
    """A new user saw the hint as "say `export HF_TOKEN=<redacted> read with ...": planner's own
    advice was scrubbed as if it held a credential, and its backtick never closed."""
    from planner._contract.credentials import HINT

    assert Redactor.for_run(environ={}).text(HINT) == HINT
