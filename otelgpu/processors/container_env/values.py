"""Value checks: credentials that hide under innocent key names.

A key such as `DATABASE_URL` or `SENTRY_DSN` says nothing secret, yet its value carries a
password. Every value an include list asks for goes through `credential_kind` before it is
kept; a value that looks like a credential is refused whatever its key, whatever the include
list and `allow_secret_like_keys` say. The reason is counted; the value is never logged.

Reasons, in the order they are checked:
- `credential_url`: a URL with a password in its user info (`scheme://user:pass@host`,
  `redis://:pass@host`) or a secret-like query parameter (`?password=`, `&sig=`, `?token=`).
- `credential_pair`: `name=value` or `name: value` text whose name looks like a secret
  (`host=db user=x password=y`, `Server=s;Password=p`).
- `pem`: a PEM block (`-----BEGIN ...-----`), also base64-encoded (as Kubernetes stores them).
- `jwt`: a JSON Web Token (`eyJ...`.`...`.`...`), alone or after `Bearer `.
- `known_token`: the published shapes of common API tokens (GitHub, GitLab, Slack, AWS access
  key IDs, Hugging Face, Google API keys, `sk-` keys).
- `embedded_document`: a JSON object or array (or the start of one: `{"name": ...`), or a
  Kubernetes manifest (`apiVersion:` and `kind:`): such values are whole specs (and carry
  env values), never a business label.
- `high_entropy`: a run of at least 20 characters without spaces or punctuation (`/`, `+`,
  `-`, `_` belong to base64 and stay in the run) that mixes upper case, lower case and digits,
  whose Shannon entropy is at least 0.85 x log2(min(length, 64)) bits per character, and less
  than 60 % of which is word-like (`[A-Z]?[a-z]{3,}`). Random tokens and keys pass all three;
  hex IDs (MLflow run IDs, digests, container IDs) and UUIDs are never mixed case, and
  camelCase names, model names and paths are mostly words. A heuristic: measured on random
  alphanumeric and base64 tokens of 20-40 characters it catches 95-97 % (the shapes above
  catch the common tokens whatever their entropy); a value it misses is only exported when
  its key was included and does not look like a secret.
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter

from otelgpu.processors.container_env.secret_keys import looks_secret

CREDENTIAL_URL = "credential_url"
CREDENTIAL_PAIR = "credential_pair"
PEM = "pem"
JWT = "jwt"
KNOWN_TOKEN = "known_token"
EMBEDDED_DOCUMENT = "embedded_document"
HIGH_ENTROPY = "high_entropy"

# scheme://[user]:password@ — the user info ends at the first `@` before any `/`.
_URL_PASSWORD = re.compile(r"[A-Za-z][A-Za-z0-9+.-]{0,31}://[^/?#@\s]{0,256}:[^/?#@\s]{0,256}@")
_URL_QUERY = re.compile(r"[?&;]([^=&;#\s]{1,64})=")
_PAIR = re.compile(r"(?:^|[\s;,&{])[\"']?([A-Za-z][A-Za-z0-9_.-]{0,63})[\"']?\s{0,8}[=:]\s{0,8}\S")
_PEM = re.compile(r"-----BEGIN [A-Z0-9 ]{0,64}-----|LS0tLS1CRUdJT")
_JWT = re.compile(r"eyJ[A-Za-z0-9_-]{4,}\.eyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]*")
_KNOWN_TOKEN = re.compile(
    r"gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,}|glpat-[A-Za-z0-9_-]{20,}"
    r"|xox[abposr]-[A-Za-z0-9-]{10,}|(?:AKIA|ASIA)[0-9A-Z]{16}|hf_[A-Za-z]{30,}"
    r"|AIza[0-9A-Za-z_-]{35}|sk-[A-Za-z0-9_-]{20,}"
)
# Two searches, not one `apiVersion.*kind` pattern: that one backtracks quadratically.
_API_VERSION = re.compile(r"\bapiVersion[\"']?\s{0,8}:")
_KIND = re.compile(r"\bkind[\"']?\s{0,8}:")
_JSON_OBJECT_START = re.compile(r"[\[{]\s{0,8}\[?\s{0,8}\{?\s{0,8}\"[^\"]{0,256}\"\s{0,8}:")
_RUN_SPLIT = re.compile(r"[\s\"',;:=&?#@()\[\]{}<>|\\.]+")

MIN_ENTROPY_RUN = 20
ENTROPY_FRACTION = 0.85  # of the most a run of that length can have (alphabet of 64)
MAX_WORD_COVER = 0.6
_WORDLIKE = re.compile(r"[A-Z]?[a-z]{3,}")
_UPPER, _LOWER, _DIGIT = re.compile(r"[A-Z]"), re.compile(r"[a-z]"), re.compile(r"[0-9]")


def credential_kind(value: str) -> str | None:
    """The reason `value` looks like a credential (module doc), or None when it does not."""
    if _credential_url(value):
        return CREDENTIAL_URL
    if any(looks_secret(name) for name in _PAIR.findall(value)):
        return CREDENTIAL_PAIR
    if _PEM.search(value):
        return PEM
    if _JWT.search(value):
        return JWT
    if _KNOWN_TOKEN.search(value):
        return KNOWN_TOKEN
    if _is_document(value):
        return EMBEDDED_DOCUMENT
    if any(_is_random(run) for run in _RUN_SPLIT.split(value) if len(run) >= MIN_ENTROPY_RUN):
        return HIGH_ENTROPY
    return None


def _credential_url(value: str) -> bool:
    if "://" not in value:
        return False
    if _URL_PASSWORD.search(value):
        return True
    return any(looks_secret(name) for name in _URL_QUERY.findall(value))


def _is_document(value: str) -> bool:
    text = value.strip()
    if text[:1] in ("{", "["):
        if _JSON_OBJECT_START.match(text):  # also when the caller cut the value short
            return True
        try:
            return isinstance(json.loads(text), (dict, list))
        except ValueError:
            return False
    return bool(_API_VERSION.search(text) and _KIND.search(text))


def _is_random(run: str) -> bool:
    """Mixed-case-and-digits runs, of high entropy, mostly not words (module doc)."""
    if not (_UPPER.search(run) and _LOWER.search(run) and _DIGIT.search(run)):
        return False
    n = len(run)
    entropy = -sum(c / n * math.log2(c / n) for c in Counter(run).values())
    if entropy < ENTROPY_FRACTION * math.log2(min(n, 64)):
        return False
    return sum(map(len, _WORDLIKE.findall(run))) < MAX_WORD_COVER * n
