"""S1: how many planted secrets the container_env key and value rules let through, and how
many ordinary business values they refuse, per include form.

The corpus is `tests/data/secret_corpus.yaml` (made concrete by the test loader), planted in
the container's env. Each include form runs through the real `KeySelector`:

- `named`: every planted key named exactly (but those only the plain-value rule can refuse);
- `glob`: globs with a literal part (`D*`, `S*`, ...), none naming a key;
- `bare *`: `include: ["*"]`, as container and pod labels may have it (the configuration
  refuses it over env and annotations).

A secret leaks when a key holding one is kept; an ordinary value is wrongly refused when its
key is named and it is not kept (under a glob a refusal is the plain-value rule's choice,
counted but not a defect).

    python bench/secret_corpus.py [--list]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from otelgpu.config.types import KeyFilter
from otelgpu.processors.container_env.keys import KeySelector
from tests.unit.processors.container_env.corpus import load


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--list", action="store_true", help="name each leak and refusal")
    args = parser.parse_args()
    env = load("36c0ffee").sources["env"]
    secrets, ordinary = env.secrets(), env.ordinary
    forms = {"named": env.named(), "glob": env.globs(), "bare *": ["*"]}
    for form, include in forms.items():
        selector = KeySelector(
            "env",
            KeyFilter(include=include),
            allow_secret_like_keys=False,
            max_value_length=4096,
        )
        kept = selector.select(env.values.items()).values
        included = [k for k in secrets if KeyFilter(include=include).allows(k)]
        leaked = [k for k in included if k in kept]
        refused = [k for k in ordinary if k not in kept]
        print(
            f"{form:7} leaked {len(leaked)}/{len(included)} secrets, "
            f"refused {len(refused)}/{len(ordinary)} ordinary values"
        )
        if args.list:
            for key in leaked:
                print(f"  leaked  {key}: {env.values[key]!r}")
            for key in refused:
                print(f"  refused {key}: {env.values[key]!r}")


if __name__ == "__main__":
    main()
