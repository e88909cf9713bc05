"""Check that the paper quotes the multi-clip config's docstring relies on are verbatim in seed
003's text. The papers are not part of the repository, so this is a script, not a test:

    python tests/seed_quotes.py PATH/TO/seeds        # the folder holding 003_*.txt

Not collected by pytest (no ``test_`` prefix); exits 1 naming a quote it cannot find.
"""

from __future__ import annotations

import glob
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.dirname(HERE)]  # the tests and the repository root

from test_configs_paper import SEED_003  # noqa: E402


def main(root: str) -> int:
    found = glob.glob(os.path.join(root, "003_*.txt"))
    if not found:
        print(f"error: no 003_*.txt under {root}; pass the seeds folder.", file=sys.stderr)
        return 2
    with open(found[0]) as f:
        paper = " ".join(f.read().split())
    missing = [q for q in SEED_003[1:3] + SEED_003[4:5] if q not in paper]
    for quote in missing:
        print(f"not in {found[0]}: {quote!r}", file=sys.stderr)
    print(f"{len(SEED_003[1:3] + SEED_003[4:5]) - len(missing)} quotes found verbatim.")
    return 1 if missing else 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    sys.exit(main(sys.argv[1]))
