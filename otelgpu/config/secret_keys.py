"""Key-name rules: which keys look like secrets, which keys are unsafe whatever they say.

They live with the configuration because two readers share them: `validate` warns about an
include pattern that names a secret, and the container_env processor refuses such keys.

A key is compared after Unicode normalisation: NFKC (full-width letters such as `\uff34`
become `T`), invisible format characters removed (zero-width space and joiners, soft
hyphen), the common Cyrillic and Greek look-alikes of Latin letters mapped to those letters,
then casefolded. The result is split into words at every character that is not a letter
or digit (`_`, `-`, `.`, `/`, ...) and at camelCase humps (`dbPassword` → `db`, `password`).

Two kinds of markers (documented in the README):
- FRAGMENTS match anywhere in the key with its separators removed: distinctive words that do
  not occur inside ordinary words (`TOKEN`, `SECRET`, `PASSW`ord, `PASSPHRASE`, ...), and
  compounds that only mean something across a separator (`CONNECTION_STRING`, `API_KEY`).
- WORDS match only a whole word, optionally plural: short markers that hide inside ordinary
  words (`KEY` in `MONKEY`, `AUTH` in `AUTHOR`, `PASS` in `PASSENGER`, `SALT` in `SALTSTACK`,
  `CERT` in `CONCERT`, `CONN` in `CONNECTOR`, `CRED` in `CREDIT`, `PRIV` in `PRIVILEGED`,
  `TOK` in `TOKYO`, `PAT` in `PATH`).

Separately, keys that are not plain printable ASCII are unsafe: no runtime or Kubernetes
needs them, and they are how a key hides from the rules above (a Cyrillic `\u041e` in
`PASSW\u041eRD`, a zero-width space in `TO\u200bKEN`). They are refused whatever the markers say.
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache

FRAGMENTS: frozenset[str] = frozenset(
    {
        "token",
        "secret",
        "passw",  # password, passwd
        "passphrase",
        "credential",
        "private",
        "cookie",
        "bearer",
        "session",
        "certificate",
        "connectionstring",
        "connstr",
        "apikey",
        "accesskey",
        "signingkey",
        "encryptionkey",
        "privkey",
        "passcode",
        "keystore",
        "keytab",
        "keyring",
        "kubeconfig",
        "netrc",
        "npmrc",
        "pgpass",
        "webhook",
        "mnemonic",
    }
)
WORDS: frozenset[str] = frozenset(
    {
        "key",
        "pwd",
        "pw",
        "pass",
        "auth",
        "authn",
        "authz",
        "oauth",
        "basicauth",
        "authorization",
        "authentication",
        "dsn",
        "jwt",
        "salt",
        "cert",
        "conn",
        "pem",
        "hmac",
        "sig",
        "signature",
        "otp",
        "cred",
        "priv",
        "tok",
        "pat",
        "sas",
        "pfx",
        "jks",
    }
)

# Look-alikes NFKC keeps apart from Latin: Cyrillic and Greek capitals and small letters.
_CONFUSABLES = str.maketrans(
    {
        **dict(zip("АВЕЅІЈКМНОРСТУХаеѕіјкорсухԁԛԝ", "ABESIJKMHOPCTYXaesijkopcyxdqw", strict=True)),
        **dict(zip("ΑΒΕΖΗΙΚΜΝΟΡΤΥΧαικνορτυχ", "ABEZHIKMNOPTYXaikvoptux", strict=True)),
    }
)
_WORD_SPLIT = re.compile(r"[^0-9a-z]+")
_HUMP = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")


def normalise(key: str) -> str:
    """`key` as the rules see it: NFKC, invisible characters removed, look-alikes mapped to
    Latin, camelCase humps marked with `_`, casefolded."""
    text = key
    if not text.isascii():  # ASCII is already its own NFKC form, with nothing to remove
        text = unicodedata.normalize("NFKC", text)
        text = "".join(ch for ch in text if unicodedata.category(ch) != "Cf")
        text = text.translate(_CONFUSABLES)
    return _HUMP.sub("_", text).casefold()


def is_safe_key(key: str) -> bool:
    """Whether every character of `key` is printable ASCII (`!` to `~`): anything else
    (spaces, controls, non-ASCII letters, invisible characters) is a key that can disguise
    itself, and is refused."""
    return key.isascii() and all("!" <= ch <= "~" for ch in key)


class SecretKeyRules:
    """Decides whether a key looks like it names a secret, from two marker sets (see the
    module doc). Built once with the defaults; tests build variants to show each marker is
    needed."""

    def __init__(
        self, fragments: frozenset[str] = FRAGMENTS, words: frozenset[str] = WORDS
    ) -> None:
        self._fragments = tuple(sorted(fragments))
        self._words = words
        self.matches = lru_cache(maxsize=8192)(self.mentions)

    def mentions(self, text: str) -> bool:
        """`matches` without the cache, for text that is not a key (a value)."""
        words = [w for w in _WORD_SPLIT.split(normalise(text)) if w]
        joined = "".join(words)
        if any(fragment in joined for fragment in self._fragments):
            return True
        return any(w in self._words or (w.endswith("s") and w[:-1] in self._words) for w in words)


DEFAULT_RULES = SecretKeyRules()


def looks_secret(key: str) -> bool:
    """Whether `key` looks like it names a secret, after Unicode normalisation."""
    return DEFAULT_RULES.matches(key)


def mentions_secret(text: str) -> bool:
    """Whether any word of `text` (a value, not a key) is one the key rules refuse."""
    return DEFAULT_RULES.mentions(text)
