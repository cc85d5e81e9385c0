"""What counts as a secret: credential-like names are, the shell's working folder is not."""

from planner._core.redact import Redactor, looks_secret


def test_credential_names_look_secret():
    for name in ("API_TOKEN", "db_password", "apiKey", "AWS_SECRET_ACCESS_KEY", "MLFLOW_TRACKING_PASSWORD"):
        assert looks_secret(name), name


def test_the_working_folder_is_not_a_secret():
    """PWD matched the 'pwd' abbreviation of password, and every path in identity.json became <redacted>."""
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


def test_each_missed_credential_form_is_cut_from_free_text_and_refused_in_a_contract():
    from planner._core.redact import credential_in_text, credentials_in

    for kind, text in MISSED.items():
        out = Redactor().text(f"printed: {text} end")
        assert "LEAKMARK" not in out and "<redacted>" in out and out.endswith(" end"), (kind, out)
        assert credential_in_text(text) is not None, kind
        assert list(credentials_in({"config": {"x": text}})), kind
    assert Redactor().text("AccountName=acct;AccountKey=Zm9vYmFyLEAKMARK1MjM0NTY3ODkw==").startswith("AccountName=acct;")
    assert list(credentials_in({"db": {"pw": "Adm1nPw-longenough"}})) and looks_secret("db.pw")


def test_credential_names_of_the_environment_are_cut_when_printed():
    env = {"AZURE_STORAGE_CONNECTION_STRING": "Endpoint=sb://x/;Opaque=LEAKMARKconnvalue", "ADMIN_PW": "Adm1n-LEAKMARK2-pw",
           "CI_REGISTRY_PAT": "LEAKMARK3plainvalue"}
    out = Redactor.for_run(environ=env).text(" ".join(env.values()))
    assert "LEAKMARK" not in out, out


def test_ordinary_ml_text_is_no_credential():
    from planner._core.redact import credential_in_text

    for text in ("p-value 0.01", "lr=3e-4", "image: nvcr.io/nvidia/pytorch:24.01-py3", "repo/name:1.0@sha256:abc.def",
                 "git@github.com:org/repo.git", "user@example.com", "at 12:30@home.x", "python -u train.py:main",
                 "sig=0.05", "kl_weight => 0.5", "pw_norm: l2", "s3://bucket/key", "mysql -h host db",
                 "entity/project:v1@latest.x", "curl -u admin https://h/"):
        assert Redactor().text(text) == text and credential_in_text(text) is None, text
    assert not looks_secret("pw_norm") and not looks_secret("max_tokens")
