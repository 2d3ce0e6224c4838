"""Key-name rules: which keys look like secrets, which keys are unsafe whatever they say.

They live with the configuration because two readers share them: `validate` warns about an
include pattern that names a secret, and the container_env processor refuses such keys.

A key is compared after Unicode normalisation: NFKD (full-width letters such as `\uff34`
become `T`) with accents and invisible format characters removed (zero-width space and
joiners, soft hyphen; `contraseña` → `contrasena`, `hasło` → `haslo`), the common Cyrillic
and Greek look-alikes of Latin letters mapped to those letters, then casefolded. The
result is split into words at every character that is not a letter or digit (`_`, `-`,
`.`, `/`, ...) and at camelCase humps (`dbPassword` → `db`, `password`). Letters of every
script are letters: a value's `пароль: ...` or `密码: ...` names a secret as `password:` does.

The markers are English and the words for password, secret, key and token in the main
languages of our users (German, French, Spanish, Portuguese, Italian, Dutch, Polish,
Swedish, Norwegian, Danish, Finnish, Czech, Hungarian, Turkish, Russian, Indonesian,
Vietnamese, Chinese, Japanese, Korean, Arabic, Hebrew, Hindi), in their own script and as
they are written in ASCII keys. Three kinds (documented in the README):
- FRAGMENTS match anywhere in the key with its separators removed: distinctive words that do
  not occur inside ordinary words (`TOKEN`, `SECRET`, `PASSW`ord, `PASSPHRASE`, ...), and
  compounds that only mean something across a separator (`CONNECTION_STRING`, `API_KEY`).
- WORDS match only a whole word, optionally plural: short markers that hide inside ordinary
  words (`KEY` in `MONKEY`, `SALT` in `SALTSTACK`, `CERT` in `CONCERT`, `CONN` in
  `CONNECTOR`, `CRED` in `CREDIT`, `PRIV` in `PRIVILEGED`, `TOK` in `TOKYO`, `PAT` in `PATH`).
- GLUED: a word (or that word plus `s`) that ends in `pass`, `passe`, `pw` or `auth`
  (`DB_PASS`, `DBPASS`, `MAILPW`, `OAUTH`, `MASTERAUTH`, `REQUIREPASS`, `MOT_DE_PASSE`;
  `PASSENGER` and `AUTHOR` do not end so), unless it holds an ordinary word that ends so
  (`COMPASS`, `BYPASS`, ...); and the misspellings of password and secret: a word whose
  consonants, vowels dropped and doubles collapsed, contain `pswd`, `pswrd` or `pswrt`
  (`PASWORD`, `PASSWROD`, `PSWD`), or are exactly `scrt` (`SECERT`, `SCRET`).

Spec-carrying annotations (`SPEC_KEYS`) hold a whole object, env values included, whatever
their values look like: they are refused by name too.

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
        "pwd",  # also glued to another word (DBPWD): no ordinary word holds it
        # other languages: password, secret, key, token
        "kennwort",
        "contrasena",
        "wachtwoord",
        "haslo",
        "losenord",
        "passord",
        "adgangskode",
        "salasana",
        "jelszo",
        "parola",
        "geheimnis",
        "segredo",
        "segreto",
        "sekret",
        "schlussel",
        "schluessel",
        "katasandi",
        "matkhau",
        "bimilbeonho",
        "пароль",
        "секрет",
        "токен",
        "密码",
        "密碼",
        "口令",
        "密钥",
        "秘钥",
        "密鑰",
        "秘密",
        "令牌",
        "パスワード",
        "暗証",
        "トークン",
        "비밀번호",
        "암호",
        "토큰",
        "كلمةالمرور",
        "كلمةالسر",
        "סיסמה",
        "पासवर्ड",
        "κωδικος",
    }
)
WORDS: frozenset[str] = frozenset(
    {
        "key",
        "authn",
        "authz",
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
        "tkn",
        "tokn",
        "tokne",
        "toekn",
        # other languages: password, secret, key, token (short, or inside ordinary words)
        "senha",
        "sifre",
        "heslo",
        "parol",
        "mima",
        "sandi",
        "geheim",
        "clave",
        "chave",
        "chiave",
        "sleutel",
        "klucz",
        "nyckel",
        "avain",
        "kulcs",
        "anahtar",
        "kunci",
        "rahasia",
        "himitsu",
        "jeton",
        "ключ",
    }
)
# Ordinary words that end like a glued marker.
GLUED_EXCEPTIONS: frozenset[str] = frozenset(
    {
        "compass",
        "bypass",
        "surpass",
        "trespass",
        "overpass",
        "underpass",
        "encompass",
        "impasse",
        "flypass",
        # filters and passes of signal processing, encoders and renderers
        "lowpass",
        "highpass",
        "bandpass",
        "allpass",
        "onepass",
        "twopass",
        "multipass",
        "singlepass",
        "firstpass",
        "secondpass",
        "renderpass",
        "subpass",
    }
)
_GLUED_ENDINGS = ("pass", "passe", "pw", "auth")
_PASSWORD_SKELETONS = ("pswd", "pswrd", "pswrt")
_SECRET_SKELETON = "scrt"

# Look-alikes NFKC keeps apart from Latin: Cyrillic and Greek capitals and small letters.
_CONFUSABLES = str.maketrans(
    {
        **dict(zip("АВЕЅІЈКМНОРСТУХаеѕіјкорсухԁԛԝ", "ABESIJKMHOPCTYXaesijkopcyxdqw", strict=True)),
        **dict(zip("ΑΒΕΖΗΙΚΜΝΟΡΤΥΧαικνορτυχ", "ABEZHIKMNOPTYXaikvoptux", strict=True)),
    }
)
# Letters without a decomposition to a base letter and an accent.
_UNACCENTED = str.maketrans(
    {
        **{"ł": "l", "ø": "o", "đ": "d", "œ": "oe", "\u0131": "i"},  # dotless i
        **{"Ł": "L", "Ø": "O", "Đ": "D", "Œ": "OE"},
    }
)
_WORD_SPLIT = re.compile(r"[\W_]+")
_HUMP = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_VOWELS = re.compile(r"[aeiou]+")
_DOUBLES = re.compile(r"(.)\1+")


def normalise(key: str) -> str:
    """`key` as the rules see it: NFKC, invisible characters removed, look-alikes mapped to
    Latin, camelCase humps marked with `_`, casefolded, accents removed."""
    text = key
    if not text.isascii():  # ASCII is already its own NFKC form, with nothing to remove
        text = unicodedata.normalize("NFKD", text)  # compatibility forms, accents apart
        text = "".join(
            ch for ch in text if not unicodedata.combining(ch) and unicodedata.category(ch) != "Cf"
        )
        text = unicodedata.normalize("NFC", text).translate(_UNACCENTED).translate(_CONFUSABLES)
    return _HUMP.sub("_", text).casefold()


# Annotations whose value is a whole object: kubectl's copy of the applied manifest (env
# values included), kapp's copy of the original, and the command line that made the change
# (`kubectl create secret ... --from-literal=password=...` lands there).
SPEC_KEYS = frozenset(
    {
        "kubectl.kubernetes.io/last-applied-configuration",
        "kapp.k14s.io/original",
        "kubernetes.io/change-cause",
    }
)
SECRET_KEY = "secret_key"
UNSAFE_KEY = "unsafe_key"
SPEC_ANNOTATION = "spec_annotation"


def is_spec_key(key: str) -> bool:
    """Whether `key` is a spec-carrying annotation (any prefix before the last-applied name)."""
    return key in SPEC_KEYS or key.endswith("last-applied-configuration")


def key_refusal(key: str, *, allow_secret_like_keys: bool = False) -> str | None:
    """Why `key` is refused by its name alone (`unsafe_key`, `spec_annotation`, `secret_key`,
    the last unless `allow_secret_like_keys`), or None. `validate` tells the keys an include
    list names; the container_env processor refuses them."""
    if not is_safe_key(key):
        return UNSAFE_KEY
    if is_spec_key(key):
        return SPEC_ANNOTATION
    if not allow_secret_like_keys and looks_secret(key):
        return SECRET_KEY
    return None


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
        # Markers in other scripts go through the normalisation keys do (Cyrillic look-alikes
        # become Latin letters in both).
        self._fragments = tuple(sorted({_joined(f) for f in fragments}))
        self._words = frozenset(_joined(w) for w in words)
        self.matches = lru_cache(maxsize=8192)(self.mentions)

    def mentions(self, text: str) -> bool:
        """`matches` without the cache, for text that is not a key (a value)."""
        words = [w for w in _WORD_SPLIT.split(normalise(text)) if w]
        joined = "".join(words)
        if any(fragment in joined for fragment in self._fragments):
            return True
        return any(
            w in self._words
            or _glued(w)
            or (w.endswith("s") and (w[:-1] in self._words or _glued(w[:-1])))
            for w in words
        )


def _joined(marker: str) -> str:
    """`marker` as `mentions` sees the text it is looked for in: normalised, its words joined."""
    return "".join(_WORD_SPLIT.split(normalise(marker)))


def _glued(word: str) -> bool:
    """A glued marker or a misspelling of password or secret (module doc)."""
    if word.endswith(_GLUED_ENDINGS) and not any(e in word for e in GLUED_EXCEPTIONS):
        return True
    skeleton = _DOUBLES.sub(r"\1", _VOWELS.sub("", word))
    return skeleton == _SECRET_SKELETON or any(s in skeleton for s in _PASSWORD_SKELETONS)


DEFAULT_RULES = SecretKeyRules()


def looks_secret(key: str) -> bool:
    """Whether `key` looks like it names a secret, after Unicode normalisation."""
    return DEFAULT_RULES.matches(key)


def mentions_secret(text: str) -> bool:
    """Whether any word of `text` (a value, not a key) is one the key rules refuse."""
    return DEFAULT_RULES.mentions(text)
