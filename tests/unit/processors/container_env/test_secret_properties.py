"""Properties: a secret-shaped value inside otherwise-safe text is refused, whether its key
was named exactly (the ordinary value checks) or matched only by a glob (the plain-value
rule); plain business text under a glob still arrives."""

from __future__ import annotations

import base64

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from otelgpu.config.types import KeyFilter
from otelgpu.processors.container_env.keys import KeySelector
from otelgpu.processors.container_env.values import credential_kind

PROPERTY = settings(
    max_examples=400,
    deadline=None,
    derandomize=True,  # the same examples every run
    suppress_health_check=[HealthCheck.too_slow],
)
SAFE = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 .-_/:"

secrets = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-", min_size=6, max_size=24)
names = st.sampled_from(
    [
        "password",
        "Password",
        "PASSWD",
        "db_password",
        "dbPassword",
        "token",
        "_authToken",
        "apiKey",
        "api-key",
        "client_secret",
        "Pwd",
        "pass",
        "AccountKey",
        "X-Api-Key",
        "Authorization",
        "private_key",
        "auth",
        "sentry_dsn",
        "db_creds",
        "ssh_priv",
        "npm_tok",
        "smtp_pass",
    ]
)
quoted = st.builds(lambda name, q: f"{q}{name}{q}", names, st.sampled_from(["", '"', "'", '\\"']))
separators = st.sampled_from(["=", ":", " = ", ": ", ":\t", '="'])


@st.composite
def shapes(draw: st.DrawFn) -> str:
    """A secret in one of the shapes credentials take inside text."""
    secret, name = draw(secrets), draw(names)
    basic = base64.b64encode(f"deploy:{secret}".encode()).decode()
    return draw(
        st.sampled_from(
            [
                f"{draw(quoted)}{draw(separators)}{secret}",
                f'{{"{name}": "{secret}"}}',
                f"db:\n  {name}: {secret}",
                f"--{name}={secret}",
                f"--{name} {secret}",
                f"-p{secret}",
                f"Bearer {secret}",
                f"Basic {basic}",
                f"Authorization: Bearer {secret}",
                f"https://user:{secret}@host.example.com/x",
                f"redis://:{secret}@cache:6379",
                f"<{name}>{secret}</{name}>",
            ]
        )
    )


@st.composite
def embedded(draw: st.DrawFn) -> str:
    """A secret shape with plain text before and after it, joined by separators."""
    before = draw(st.text(alphabet=SAFE, max_size=24))
    after = draw(st.text(alphabet=SAFE, max_size=24))
    joiners = st.sampled_from([" ", ";", "\n", ", ", "&", " | ", "\t"])
    head = f"{before}{draw(joiners)}" if before else ""
    tail = f"{draw(joiners)}{after}" if after else ""
    return f"{head}{draw(shapes())}{tail}"


def _glob_refuses(value: str) -> bool:
    selector = KeySelector(
        "env", KeyFilter(include=["*"]), allow_secret_like_keys=False, max_value_length=256
    )
    got = selector.select([("SETTING", value)])
    return got.values == {} and len(got.refused) == 1


@PROPERTY
@given(value=embedded())
def test_a_secret_shape_inside_safe_text_is_refused_by_the_ordinary_checks(value: str) -> None:
    assert credential_kind(value) is not None


@PROPERTY
@given(value=embedded())
def test_a_secret_shape_inside_safe_text_is_refused_under_a_glob(value: str) -> None:
    assert _glob_refuses(value)


WORDS = ["team", "vision", "detector", "cc", "42", "prod", "eval", "us-east-1", "v2", "llama"]


@PROPERTY
@given(
    words=st.lists(st.sampled_from(WORDS), min_size=1, max_size=6),
    joiner=st.sampled_from([" ", "-", ".", "/", ":", "_"]),
)
def test_plain_business_text_arrives_under_a_glob(words: list[str], joiner: str) -> None:
    value = joiner.join(words)[:64]
    # Two words and one `:` or `/` are what `user:password` looks like: a glob refuses them
    # unless the second is a number (`db:5432`); a named key exports them. Five fields
    # joined by `:`, the second a number, are a .pgpass line (host:port:db:user:password).
    pair = len(words) == 2 and joiner in ":/" and words[1] != "42"
    pgpass = len(words) == 5 and joiner == ":" and words[1] == "42"
    assert _glob_refuses(value) == (pair or pgpass), value
