"""Published token formats: what a credential of each issuer looks like, and where it says so.

A value holding one of these is refused (`known_token`) whatever its key and however the key
was included. Each shape starts where no letter or digit comes before it (`task-...` does not
hold an `sk-` key). The formats are the issuers' own documentation of their prefixes; a token
without a published shape is left to the other rules.
"""

from __future__ import annotations

import re
from typing import NamedTuple


class TokenFormat(NamedTuple):
    """One issuer's token shape and the page that documents it."""

    name: str
    pattern: str
    source: str


TOKEN_FORMATS: tuple[TokenFormat, ...] = (
    TokenFormat(
        "GitHub token",
        r"gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,}",
        "https://github.blog/2021-04-05-behind-githubs-new-authentication-token-formats/",
    ),
    TokenFormat(
        "GitLab token",
        r"gl(?:pat|dt|ptt|rt|cbt|soat|ffct|imt|oas)-[A-Za-z0-9_-]{20,}",
        "https://docs.gitlab.com/ee/security/tokens/#token-prefixes",
    ),
    TokenFormat(
        "Slack token",
        r"xox[abposr]-[A-Za-z0-9-]{10,}|xapp-[A-Za-z0-9-]{10,}",
        "https://api.slack.com/authentication/token-types",
    ),
    TokenFormat(
        "Slack incoming webhook",
        r"hooks\.slack\.com/services/T[A-Z0-9]+/B[A-Z0-9]+/[A-Za-z0-9]+",
        "https://api.slack.com/messaging/webhooks",
    ),
    TokenFormat(
        "AWS access key ID",
        r"(?:AKIA|ASIA)[0-9A-Z]{16}",
        "https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_identifiers.html",
    ),
    TokenFormat(
        "Google API key",
        r"AIza[0-9A-Za-z_-]{35}",
        "https://cloud.google.com/docs/authentication/api-keys",
    ),
    TokenFormat(
        "Google OAuth access token",
        r"ya29\.[0-9A-Za-z_-]{20,}",
        "https://developers.google.com/identity/protocols/oauth2",
    ),
    TokenFormat(
        "OpenAI or Anthropic API key",
        r"sk-[A-Za-z0-9_-]{20,}",
        "https://platform.openai.com/docs/api-reference/authentication",
    ),
    TokenFormat(
        "Hugging Face token",
        r"hf_[A-Za-z]{30,}",
        "https://huggingface.co/docs/hub/security-tokens",
    ),
    TokenFormat(
        "Stripe secret or restricted key",
        r"[sr]k_(?:live|test)_[0-9A-Za-z]{16,}",
        "https://docs.stripe.com/keys",
    ),
    TokenFormat(
        "npm access token",
        r"npm_[A-Za-z0-9]{36}",
        "https://github.blog/2021-09-23-announcing-npms-new-access-token-format/",
    ),
    TokenFormat(
        "PyPI API token",
        r"pypi-AgEIcHlwaS5vcmc[A-Za-z0-9_-]{20,}",
        "https://pypi.org/help/#apitoken",
    ),
    TokenFormat(
        "Docker Hub personal access token",
        r"dckr_pat_[A-Za-z0-9_-]{20,}",
        "https://docs.docker.com/security/for-developers/access-tokens/",
    ),
    TokenFormat(
        "HashiCorp Vault token",
        r"hv[sbr]\.[A-Za-z0-9_-]{20,}",
        "https://developer.hashicorp.com/vault/docs/concepts/tokens#token-prefixes",
    ),
    TokenFormat(
        "Databricks personal access token",
        r"dapi[0-9a-f]{32}",
        "https://docs.databricks.com/en/dev-tools/auth/pat.html",
    ),
    TokenFormat(
        "SendGrid API key",
        r"SG\.[A-Za-z0-9_-]{16,}\.[A-Za-z0-9_-]{16,}",
        "https://www.twilio.com/docs/sendgrid/ui/account-and-settings/api-keys",
    ),
    TokenFormat(
        "Tailscale key",
        r"tskey-[a-z]+-[A-Za-z0-9-]{10,}",
        "https://tailscale.com/kb/1085/auth-keys",
    ),
    TokenFormat(
        "Grafana service account or Cloud token",
        r"gl(?:sa|c)_[A-Za-z0-9_=+/-]{20,}",
        "https://grafana.com/docs/grafana/latest/administration/service-accounts/",
    ),
    TokenFormat(
        "Shopify access token",
        r"shp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}",
        "https://shopify.dev/docs/apps/build/authentication-authorization",
    ),
    TokenFormat(
        "Kubernetes bootstrap token",
        r"[a-z0-9]{6}\.(?=[a-z]*[0-9])[a-z0-9]{16}(?![A-Za-z0-9.])",
        "https://kubernetes.io/docs/reference/access-authn-authz/bootstrap-tokens/",
    ),
    TokenFormat(
        "age secret key",
        r"AGE-SECRET-KEY-1[0-9A-Z]{58}",
        "https://age-encryption.org/v1",
    ),
)

KNOWN_TOKEN_PATTERN = re.compile(
    r"(?<![A-Za-z0-9.])(?:" + "|".join(f"(?:{f.pattern})" for f in TOKEN_FORMATS) + ")"
)
