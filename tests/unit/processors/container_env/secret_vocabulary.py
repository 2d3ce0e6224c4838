"""Key names workloads commonly give their secrets: every one must be refused by the key rules.

The unit tests check each name against the rules; the S1 end-to-end test plants a canary value
under each and looks for it in every output."""

from __future__ import annotations

COMMON_SECRET_KEYS = [
    "MYSQL_PWD",
    "DB_PASS",
    "BASIC_AUTH",
    "SENTRY_DSN",
    "PRIVATE",
    "TLS_CERT",
    "PASSPHRASE",
    "SESSION_COOKIE",
    "JWT",
    "BEARER",
    "CONN_STR",
    "SIGNING_SALT",
    "AUTH_HEADER",
]
