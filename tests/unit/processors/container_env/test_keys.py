"""Key rules: include/exclude globs, secret-like and unsafe keys, value checks, value caps."""

from __future__ import annotations

import pytest

from otelgpu.config.secret_keys import (
    FRAGMENTS,
    GLUED_EXCEPTIONS,
    WORDS,
    SecretKeyRules,
    is_safe_key,
    key_refusal,
    mentions_secret,
    normalise,
)
from otelgpu.config.types import KeyFilter
from otelgpu.processors.container_env.keys import KeySelector, looks_secret, refusal
from tests.unit.processors.container_env.secret_vocabulary import COMMON_SECRET_KEYS


def _selector(
    include: list[str], exclude: tuple[str, ...] = (), *, allow_secret_like_keys: bool = False
) -> KeySelector:
    return KeySelector(
        "env",
        KeyFilter(include=include, exclude=list(exclude)),
        allow_secret_like_keys=allow_secret_like_keys,
        max_value_length=8,
    )


def _reasons(selector: KeySelector, pairs: list[tuple[str, str]]) -> dict[str, str]:
    got = selector.select(pairs)
    assert got.values == {}, got.values
    return {str(key): getattr(key, "reason", "?") for key in got.refused}


@pytest.mark.parametrize(
    "key",
    [
        "GITHUB_TOKEN",
        "db_password",
        "AWS_SECRET_ACCESS_KEY",
        "MYSQL_PASSWD",
        "api-key",
        "Credentials_File",
        "ssh.Key.path",
    ],
)
def test_secret_like_keys(key: str) -> None:
    assert looks_secret(key)


# Common secret vocabularies: the key rules must refuse each of these.
@pytest.mark.parametrize(
    "key",
    [
        *COMMON_SECRET_KEYS,
        "CONNECTION_STRING",
        "dbPass",  # camelCase humps split words
        "example.com/jwt",  # label keys split on `.` and `/`
        "SSH_KEYS",  # plurals of short words
    ],
)
def test_common_secret_vocabularies(key: str) -> None:
    assert looks_secret(key)


@pytest.mark.parametrize(
    "key",
    [
        "TO\u200bKEN",  # zero-width space
        "PASSW\u041eRD",  # Cyrillic capital O
        "\u0410PI_KEY",  # Cyrillic capital A
        "DB_P\u0391SS",  # Greek capital alpha
        "\uff24\uff22\uff3f\uff30\uff21\uff33\uff33",  # full-width DB_PASS
        "SE\u00adCRET",  # soft hyphen
    ],
)
def test_secret_words_are_matched_after_unicode_normalisation(key: str) -> None:
    assert looks_secret(key)


@pytest.mark.parametrize("key", ["MYSQL_P\u200bWD", "DB_P\u00adW", "J\u200dWT"])
def test_invisible_characters_inside_a_short_word_are_removed_before_matching(key: str) -> None:
    # Short markers match whole words only: an invisible character left in place would split
    # `PWD` into `P` and `WD`, and the key would pass as ordinary.
    assert looks_secret(key)


def test_normalise_removes_format_characters() -> None:
    assert normalise("A\u200bB\u00adC\u200dD") == "abcd"


@pytest.mark.parametrize(
    ("key", "plain"),
    [
        ("has\u0142o", "haslo"),
        ("HAS\u0141O", "HASLO"),
        ("pass\u00f8rd", "passord"),
        ("PASS\u00d8RD", "PASSORD"),
        ("db_pw\u0111", "db_pwd"),
        ("DB_PW\u0110", "DB_PWD"),
        ("t\u0153kn", "toekn"),
        ("T\u0152KN", "TOEKN"),
        ("pr\u0131vate", "private"),
    ],
)
def test_letters_without_an_accent_to_remove_are_mapped_to_latin(key: str, plain: str) -> None:
    assert normalise(key) == normalise(plain)
    assert looks_secret(key)


# Short markers match whole words only: these business keys keep their labels.
@pytest.mark.parametrize(
    "key",
    [
        "TEAM",
        "PROJECT",
        "COST_CENTER",
        "MLFLOW_RUN_ID",
        "app.kubernetes.io/name",
        "example.com/cost-center",
        "MONKEY",  # KEY inside a word
        "org.opencontainers.image.authors",  # AUTH inside a word
        "PASSENGER_COUNT",  # PASS inside a word
        "BYPASS_CACHE",
        "SALTSTACK_MASTER",  # SALT inside a word
        "CONCERT_HALL",  # CERT inside a word
        "CONNECTOR_NAME",  # CONN inside a word
        "KEYCLOAK_URL",
        "HOME",
        "PATH",
        "CREDIT_LIMIT",  # CRED inside a word
        "PRIVILEGED",  # PRIV inside a word
        "TOKYO_REGION",  # TOK inside a word
        "PATTERN",  # PAT inside a word
        "SASL_MECHANISM",  # SAS inside a word
    ],
)
def test_ordinary_keys(key: str) -> None:
    assert not looks_secret(key)


# One key per marker that only that marker catches: deleting any marker fails this test.
ONLY_BY = {
    "token": "HF_TOKEN",
    "secret": "CLIENTSECRET",
    "passw": "PASSWAY",  # password is also a misspelling's skeleton; this is not
    "passphrase": "SSH_PASSPHRASE",
    "credential": "GIT_CREDENTIALS",
    "private": "PRIVATE",
    "cookie": "COOKIE_JAR",
    "bearer": "BEARER",
    "session": "SESSION_ID",
    "certificate": "SSL_CERTIFICATE",
    "connectionstring": "CONNECTION_STRING",
    "connstr": "DB_CONNSTR",
    "apikey": "APIKEY",
    "accesskey": "ACCESSKEY_ID",
    "signingkey": "SIGNINGKEY",
    "encryptionkey": "ENCRYPTIONKEY",
    "key": "SSH_KEY",
    "pwd": "MYSQL_PWD",
    "authn": "AUTHN",
    "authz": "AUTHZ",
    "authorization": "AUTHORIZATION",
    "authentication": "AUTHENTICATION",
    "dsn": "SENTRY_DSN",
    "jwt": "JWT",
    "salt": "SIGNING_SALT",
    "cert": "TLS_CERT",
    "conn": "DB_CONN",
    "pem": "CA_PEM",
    "hmac": "HMAC",
    "sig": "URL_SIG",
    "signature": "REQUEST_SIGNATURE",
    "otp": "OTP",
    "privkey": "APP_PRIVKEY",
    "passcode": "PASSCODE",
    "keystore": "JAVA_KEYSTORE",
    "keytab": "KRB5_KEYTAB",
    "keyring": "GNOME_KEYRING",
    "kubeconfig": "KUBECONFIG",
    "netrc": "NETRC",
    "npmrc": "NPMRC",
    "pgpass": "PGPASSFILE",
    "webhook": "SLACK_WEBHOOK_URL",
    "mnemonic": "WALLET_MNEMONIC",
    "cred": "GIT_CRED",
    "priv": "SSH_PRIV",
    "tok": "NPM_TOK",
    "pat": "GITHUB_PAT",
    "sas": "AZURE_SAS",
    "pfx": "CLIENT_PFX",
    "jks": "TRUST_JKS",
    "tkn": "NPM_TKN",
    "tokn": "TOKN",
    "tokne": "TOKNE",
    "toekn": "TOEKN",
    # other languages
    "kennwort": "SMTP_KENNWORT",
    "contrasena": "CONTRASENA_DB",
    "wachtwoord": "WACHTWOORD",
    "haslo": "HASLO_BAZY",
    "losenord": "LOSENORD",
    "passord": "PASSORD",
    "adgangskode": "ADGANGSKODE",
    "salasana": "SALASANA",
    "jelszo": "JELSZO",
    "parola": "DB_PAROLA",
    "geheimnis": "GEHEIMNIS",
    "segredo": "SEGREDO",
    "segreto": "SEGRETO",
    "sekret": "SEKRET_APP",
    "schlussel": "SCHLUSSEL",
    "schluessel": "SCHLUESSEL",
    "katasandi": "KATASANDI",
    "matkhau": "MATKHAU",
    "bimilbeonho": "BIMILBEONHO",
    "пароль": "db_пароль",
    "секрет": "секрет",
    "токен": "токен",
    "密码": "数据库密码",
    "密碼": "密碼",
    "口令": "口令",
    "密钥": "密钥",
    "秘钥": "秘钥",
    "密鑰": "密鑰",
    "秘密": "秘密",
    "令牌": "令牌",
    "パスワード": "パスワード",
    "暗証": "暗証番号",
    "トークン": "トークン",
    "비밀번호": "비밀번호",
    "암호": "암호",
    "토큰": "토큰",
    "كلمةالمرور": "كلمة المرور",
    "كلمةالسر": "كلمة السر",
    "סיסמה": "סיסמה",
    "पासवर्ड": "पासवर्ड",
    "κωδικος": "κωδικός",
    "senha": "SENHA_BANCO",
    "sifre": "SIFRE",
    "heslo": "HESLO",
    "parol": "PAROL",
    "mima": "DB_MIMA",
    "sandi": "SANDI",
    "geheim": "GEHEIM_WERT",
    "clave": "CLAVE_API",
    "chave": "CHAVE_ACESSO",
    "chiave": "CHIAVE",
    "sleutel": "SLEUTEL",
    "klucz": "KLUCZ",
    "nyckel": "NYCKEL",
    "avain": "AVAIN",
    "kulcs": "KULCS",
    "anahtar": "ANAHTAR",
    "kunci": "KUNCI",
    "rahasia": "RAHASIA",
    "himitsu": "HIMITSU",
    "jeton": "JETON",
    "ключ": "ключ",
}


def test_every_marker_has_a_key_only_it_catches() -> None:
    assert set(ONLY_BY) == FRAGMENTS | WORDS
    full = SecretKeyRules()
    for marker, key in ONLY_BY.items():
        without = SecretKeyRules(FRAGMENTS - {marker}, WORDS - {marker})
        assert full.matches(key), key
        assert not without.matches(key), f"{key} is also caught without {marker!r}"


@pytest.mark.parametrize(
    "key",
    [
        "DB_PASS",
        "DBPASS",
        "SMTPPASS",
        "REQUIREPASS",
        "MOT_DE_PASSE",
        "DB_PASSES",
        "MAILPW",
        "DB_PWS",
        "AUTH_HEADER",
        "OAUTH",
        "MASTERAUTH",
        "AUTHS",
        "PASWORD",
        "PASSWROD",
        "PASSOWRD",
        "ADMIN_PSWD",
        "PASWD",
        "PASSWRT",
        "SECERT",
        "APP_SCRET",
        "db_Secrt",
        "contraseña",
        "hasło",
        "lösenord",
        "şifre",
    ],
)
def test_glued_words_misspellings_and_accents_look_secret(key: str) -> None:
    assert looks_secret(key)


@pytest.mark.parametrize("key", ["sshKey", "sslCert", "dbConn", "gitPat", "s3Sig", "caf\u00e9Key"])
def test_camel_case_humps_split_words(key: str) -> None:
    # `key`, `cert`, `conn`, `pat` and `sig` match whole words only: without the split at the
    # hump, `sshkey` would be one ordinary word.
    assert looks_secret(key)


@pytest.mark.parametrize(
    "key",
    [
        *(w.upper() for w in GLUED_EXCEPTIONS),
        "COMPASSES",
        "SMTPBYPASS_HOST",
        "AUTHOR",
        "PASSENGER_COUNT",
        "SECURITY_GROUP",
        "SCRIPT_PATH",
        "POWER_LIMIT",
        "PWR_LIMIT",
        "PWM_FREQ",
        "TAKEN_AT",
    ],
)
def test_words_that_only_resemble_glued_markers_pass(key: str) -> None:
    assert not looks_secret(key)


def test_plural_words_need_the_plural_rule() -> None:
    assert SecretKeyRules().matches("SSH_KEYS")
    assert not SecretKeyRules().matches("KEYSTONE_URL")


def test_include_exclude_globs_and_exact_keys() -> None:
    sel = _selector(["TEAM", "MLFLOW_*"], ("MLFLOW_SKIP*",))
    got = sel.select([("TEAM", "ml"), ("TEAMS", "x"), ("MLFLOW_RUN", "r"), ("MLFLOW_SKIP1", "s")])
    assert got.values == {"TEAM": "ml", "MLFLOW_RUN": "r"}
    assert got.refused == []


UNSAFE = "a=b"  # no credential, but not plainly safe: only a named key may export it


def test_refusal_takes_a_key_as_named_unless_told_it_was_only_a_glob_match() -> None:
    assert refusal("SETTING", UNSAFE) is None
    assert refusal("SETTING", UNSAFE, named=True) is None
    assert refusal("SETTING", UNSAFE, named=False) == "glob_unsafe_characters"


def test_a_key_only_a_glob_matched_is_held_to_the_plain_value_rule() -> None:
    got = _selector(["MLFLOW_RUN_ID", "MLFLOW_*"]).select(
        [("MLFLOW_RUN_ID", UNSAFE), ("MLFLOW_EXPERIMENT", UNSAFE), ("MLFLOW_USER", "alice")]
    )
    assert got.values == {"MLFLOW_RUN_ID": UNSAFE, "MLFLOW_USER": "alice"}
    assert got.refused == ["MLFLOW_EXPERIMENT"]
    assert [getattr(k, "reason", None) for k in got.refused] == ["glob_unsafe_characters"]


def test_secret_like_keys_refused_whatever_include_says() -> None:
    got = _selector(["*"]).select([("TEAM", "ml"), ("HF_TOKEN", "hf_canary"), ("db_Password", "p")])
    assert got.values == {"TEAM": "ml"}
    assert got.refused == ["HF_TOKEN", "db_Password"]
    assert [getattr(k, "reason", None) for k in got.refused] == ["secret_key", "secret_key"]


def test_secret_like_keys_pass_when_allowed() -> None:
    got = _selector(["HF_TOKEN"], allow_secret_like_keys=True).select([("HF_TOKEN", "t")])
    assert got.values == {"HF_TOKEN": "t"}


def test_unsafe_keys_are_refused_even_when_secrets_are_allowed() -> None:
    pairs = [
        ("TE\u0410M", "ml"),  # Cyrillic A: a look-alike of an ordinary key
        ("TO\u200bKEN", "t"),
        ("TEAM NAME", "x"),
        ("TEAM\r", "x"),
        ("\u00e9quipe", "x"),
    ]
    reasons = _reasons(_selector(["*"], allow_secret_like_keys=True), pairs)
    assert reasons == {key: "unsafe_key" for key, _ in pairs}


@pytest.mark.parametrize("key", ["!", "~", "A!~", "x-y_z.1/2"])
def test_printable_ascii_keys_are_safe_to_both_ends_of_the_range(key: str) -> None:
    assert is_safe_key(key)


@pytest.mark.parametrize("key", [" ", "\x7f", "A\x1fB", "caf\u00e9"])
def test_keys_outside_printable_ascii_are_unsafe(key: str) -> None:
    assert not is_safe_key(key)


def test_key_refusal_refuses_secret_like_keys_unless_allowed() -> None:
    assert key_refusal("DB_PASSWORD") == "secret_key"
    assert key_refusal("DB_PASSWORD", allow_secret_like_keys=True) is None
    assert key_refusal("kapp.k14s.io/original", allow_secret_like_keys=True) == "spec_annotation"
    assert key_refusal("TE\u0410M", allow_secret_like_keys=True) == "unsafe_key"
    assert key_refusal("TEAM") is None


def test_spec_carrying_annotations_are_never_exported() -> None:
    annotations = KeySelector(
        "annotations",
        KeyFilter(include=["*"]),
        allow_secret_like_keys=True,
        max_value_length=1 << 20,
    )
    spec = '{"apiVersion":"v1","kind":"Pod","spec":{"containers":[{"env":[]}]}}'
    got = annotations.select(
        [
            ("kubectl.kubernetes.io/last-applied-configuration", spec),
            ("kubectl.kubernetes.io/last-applied-configuration", "short"),
            ("example.com/last-applied-configuration", "x"),
            ("kapp.k14s.io/original", "x"),
            ("kubernetes.io/change-cause", "kubectl create secret --from-literal=a=b"),
            ("example.com/manifest", spec),  # any key: the value is a whole document
            ("example.com/owner", "alice"),
        ]
    )
    assert got.values == {"example.com/owner": "alice"}
    assert [getattr(k, "reason", None) for k in got.refused] == [
        "spec_annotation",
        "spec_annotation",
        "spec_annotation",
        "spec_annotation",
        "spec_annotation",
        "embedded_document",
    ]


def test_credential_values_are_refused_whatever_the_key_and_options() -> None:
    pairs = [
        ("DATABASE_URL", "postgres://app:hunter2@db:5432/app"),
        ("MLFLOW_TRACKING_URI", "https://ml:s3cr3t@mlflow.example.com"),
        ("NOTE", "Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjMifQ.c2ln"),
        ("CA", "-----BEGIN CERTIFICATE-----\nMIIB"),
        ("RANDOM", "q8Zr2LmX7vT1kP4nW9sB3yH6"),
    ]
    reasons = _reasons(_selector(["*"], allow_secret_like_keys=True), pairs)
    assert reasons == {
        "DATABASE_URL": "credential_url",
        "MLFLOW_TRACKING_URI": "credential_url",
        "NOTE": "jwt",
        "CA": "pem",
        "RANDOM": "high_entropy",
    }


def test_values_are_checked_whole_before_the_cap() -> None:
    # Cut to 8 characters the URL would look harmless; the check sees all of it.
    got = _selector(["*"]).select([("DATABASE_URL", "mysql://root:pw@db/x")])
    assert got.values == {} and got.truncated == 0


def test_excluded_secret_is_not_a_refusal() -> None:
    got = _selector(["*"], ("*TOKEN*",)).select([("HF_TOKEN", "t")])
    assert got.values == {} and got.refused == []


def test_long_values_are_cut_and_counted() -> None:
    got = _selector(["A", "B"]).select([("A", "123456789abc"), ("B", "12345678")])
    assert got.values == {"A": "12345678", "B": "12345678"}
    assert got.truncated == 1


def test_empty_include_reads_nothing() -> None:
    def never() -> object:
        raise AssertionError("an empty include list must not even read the data")
        yield

    sel = _selector([])
    assert not sel.enabled
    assert sel.select(never()).values == {}  # type: ignore[arg-type]


def test_a_credential_across_the_cap_is_seen_but_a_huge_value_is_checked_only_near_it() -> None:
    url = "https://user:" + "p" * 200 + "@db.example.com"  # the password runs past the cap
    got = _selector(["*"]).select([("DATABASE_URL", url)])
    assert got.values == {} and [getattr(k, "reason", "") for k in got.refused] == [
        "credential_url"
    ]
    far = "x" * 8 + " " * 2000 + "-----BEGIN CERTIFICATE-----"  # nothing of it is exported
    kept = _selector(["NOTE"]).select([("NOTE", far)])
    assert kept.values == {"NOTE": "x" * 8}


def test_a_cut_json_document_is_still_a_document() -> None:
    spec = '{"spec": {"containers": [' + '{"env": [{"name": "A", "value": "b"}]},' * 500
    got = _selector(["*"]).select([("example.com/manifest", spec)])
    assert [getattr(k, "reason", "") for k in got.refused] == ["embedded_document"]


@pytest.mark.parametrize(
    ("text", "mentions"),
    [
        ("the db password is hunter2", True),
        ("API_TOKEN=abc", True),
        ("s3cr3t", False),  # a value's shape is values.py's to judge, not a word
        ("nightly build of the trainer", False),
    ],
)
def test_a_value_mentions_a_secret_when_a_word_of_it_is_one_a_key_would_be_refused_for(
    text: str, mentions: bool
) -> None:
    assert mentions_secret(text) is mentions
