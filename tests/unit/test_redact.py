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
