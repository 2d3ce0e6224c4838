"""Value checks for the shapes a credential takes inside text: every `name=value` pair,
structured values (JSON, YAML), command lines, npmrc, DSNs, Authorization headers, encoded
text; and the key names that carry secrets under short suffixes.

Each secret here is a plain canary (lowercase words and hex), so only the shape around it
can give it away."""

from __future__ import annotations

import base64
from urllib.parse import quote

import pytest

from otelgpu.config.secret_keys import looks_secret
from otelgpu.processors.container_env.values import credential_kind

X = "canary-shape-1a2b3c4d"
BASIC = base64.b64encode(f"deploy:{X}".encode()).decode()


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        # every pair of a list is checked, not only the first
        (f"Server=;Password={X}", "credential_pair"),
        (f"x=;token={X}", "credential_pair"),
        (f"a=1;b=;secret={X}", "credential_pair"),
        (f"user=u|password={X}", "credential_pair"),
        (f"Data Source=db;Initial Catalog=x;User ID=u;Pwd={X}", "credential_pair"),
        # structured values: JSON after a prefix, escaped JSON, YAML (nested, quoted)
        (f'settings: {{"password":"{X}"}}', "credential_pair"),
        (f'{{\\"password\\":\\"{X}\\"}}', "credential_pair"),
        (f'"{{\\"db_password\\": \\"{X}\\"}}"', "credential_pair"),
        (f"db:\n  password: {X}", "credential_pair"),
        (f"db:\n  password: '{X}'", "credential_pair"),
        (f"db:\n  host: h\n  'client secret': {X}", "credential_pair"),
        (f"env:\n- name: DB_PASSWORD\n  value: {X}", "credential_pair"),
        (f'name="API_TOKEN",value="{X}"', "credential_pair"),
        (f"<password>{X}</password>", "credential_pair"),
        # command lines
        (f"--password={X}", "credential_pair"),
        (f"-p{X}", "credential_flag"),
        (f"mysql -uroot -p{X} app", "credential_flag"),
        (f"--token {X}", "credential_flag"),
        (f"serve --db-password {X} --port 8080", "credential_flag"),
        (f'serve "--api-key" "{X}"', "credential_flag"),
        (f"curl -u deploy:{X} https://example.com", "credential_flag"),
        # npmrc, Sentry DSN, Authorization headers
        (f"_authToken={X}", "credential_pair"),
        (f"//registry.npmjs.org/:_authToken={X}", "credential_pair"),
        (f"_auth={X}", "credential_pair"),
        ("https://0123456789abcdef0123456789abcdef@o123.ingest.sentry.io/456", "credential_url"),
        (f"https://x-access-token@github.com/org/{X}.git", "credential_url"),
        (f"Basic {BASIC}", "credential_header"),
        (f"Bearer {X}", "credential_header"),
        (f"bearer {X}", "credential_header"),
        (f'Digest username="u", response="{X}"', "credential_header"),
        # encoded text: percent-encoding, base64
        (f"db%3A%0A%20%20password%3A%20{X}", "credential_pair"),
        (quote(f'{{"password":"{X}"}}'), "credential_pair"),
        (base64.b64encode(f"password={X}".encode()).decode(), "credential_pair"),
    ],
)
def test_credential_shapes_inside_text_are_found(value: str, reason: str) -> None:
    assert credential_kind(value) == reason


@pytest.mark.parametrize(
    ("value", "kind"),
    [
        ("Server=db&#59;Password&#61;hunter2x", "credential_pair"),  # HTML entities
        ("&#123;&quot;password&quot;: &quot;hunter2x&quot;&#125;", "credential_pair"),
        ("Authorization&#58; Bearer abc", "credential_pair"),
        ("Server=db\\u003bPassword\\u003dhunter2x", "credential_pair"),  # \uXXXX escapes
        ("{\\u0022password\\u0022: \\u0022x\\u0022}", "credential_pair"),
        ("tok\\u0065n=abc", "credential_pair"),
    ],
)
def test_a_secret_that_shows_only_once_its_escapes_are_decoded_is_refused(
    value: str, kind: str
) -> None:
    assert credential_kind(value) == kind


@pytest.mark.parametrize(
    "key",
    [
        "DB_CREDS",
        "GIT_CRED",
        "SSH_PRIV",
        "NPM_TOK",
        "REGISTRY_AUTH",
        "MYSQL_PWD",
        "SMTP_PASS",
        "SENTRY_DSN",
        "CLIENT_CERT",
        "GITHUB_PAT",
        "NPMRC",
        "NETRC",
        "PGPASS",
        "APP_PRIVKEY",
        "JAVA_KEYSTORE",
        "KUBECONFIG",
        "SLACK_WEBHOOK_URL",
        "PASSCODE",
        "AZURE_SAS",
        "db\uff3fcreds",  # full-width low line: matched after Unicode normalisation
        "SSH_PR\u0406V",  # a Cyrillic I
    ],
)
def test_short_suffixes_and_secret_files_look_secret(key: str) -> None:
    assert looks_secret(key)


@pytest.mark.parametrize(
    "value",
    [
        "http://mlflow.example.com:5000",
        "host=db user=app dbname=x sslmode=require",
        "serve --port 8080 --workers 4",
        "python train.py --epochs 3 --lr 0.001",
        "mkdir -p /data/cache",
        "Basic plan",
        "basic settings",
        "the bearer of news",
        "primary:\n  region: eu-west-1",
        "2024-05-01T12:00:00Z",
        "a100-80gb",
        "ghcr.io/org/auth-service:1.4",  # an image and its tag, not `auth: 1.4`
        "docker run -u 1000:1000 trainer",  # a uid:gid, not a user:password
        "token budget 4096",
    ],
)
def test_business_values_with_similar_shapes_pass(value: str) -> None:
    assert credential_kind(value) is None
