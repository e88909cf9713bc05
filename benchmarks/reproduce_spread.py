r"""How far the reproduction runs move across CPU instruction sets and XLA flag sets, and under
deliberate changes: the measurement behind tests/test_reproduce.py's tolerance (``RTOL``).

    python benchmarks/reproduce_spread.py --out=/tmp/spread            # the flag sets
    python benchmarks/reproduce_spread.py --out=/tmp/spread --only_table

Each flag set writes the reproduction fixture of tests/test_reproduce.py (its tiny seeded run of
every committed study) with ``MASKDP_WRITE_REPRODUCE=1``, compiled under those XLA flags on top of
the suite's (tests/conftest.py); ``--xla_cpu_max_isa`` makes XLA compile for an older instruction
set, which is what another CPU generation changes. The table gives, for each flag set against the
first, the largest relative difference ``|a − b| / (1 + |b|)`` of the logged losses and of the test
logits over all studies, and whether the exact quantities (sampled batches, privacy block, ε)
are equal. A fixture written elsewhere (e.g. by a mutated tree) can be added with ``--extra``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FLAG_SETS = {
    "suite (host ISA)": "",
    "AVX2 only": "--xla_cpu_max_isa=AVX2",
    "AVX only": "--xla_cpu_max_isa=AVX",
    "default optimisation": "--xla_backend_optimization_level=2 "
                            "--xla_llvm_disable_expensive_passes=false",
}


def write_fixture(path: str, xla_flags: str) -> None:
    """tests/test_reproduce.py's fixture, written to ``path`` under ``xla_flags``."""
    # tests/conftest.py puts the suite's flags first: a flag given again here takes its value.
    env = dict(os.environ, MASKDP_WRITE_REPRODUCE="1", MASKDP_REPRODUCE_FIXTURE=path,
               XLA_FLAGS=xla_flags)
    subprocess.run([sys.executable, "-m", "pytest", "-q", "-m", "heavy", "-p", "no:cacheprovider",
                    "tests/test_reproduce.py::test_study_reproduces"], check=True, cwd=ROOT,
                   env=env)


def spread(a: dict, b: dict) -> dict:
    """The largest relative difference of losses and logits of fixture ``a`` against ``b``, and
    whether every exact quantity is equal."""
    losses, logits, exact = 0.0, 0.0, True
    for study, entry in b["studies"].items():
        x, y = a["studies"][study]["numbers"], entry["numbers"]
        for key in ("batches", "privacy", "num_examples"):
            exact &= x[key] == y[key]
        exact &= [(h["step"], h["epsilon"]) for h in x["history"]] == [
            (h["step"], h["epsilon"]) for h in y["history"]]
        for hx, hy in zip(x["history"], y["history"], strict=True):
            for k in hy.keys() - {"step", "epsilon"}:
                losses = max(losses, abs(hx[k] - hy[k]) / (1 + abs(hy[k])))
        lx, ly = np.asarray(x["test_logits"]), np.asarray(y["test_logits"])
        logits = max(logits, float(np.max(np.abs(lx - ly) / (1 + np.abs(ly)))))
    return {"losses": losses, "logits": logits, "exact": exact}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, help="Folder for the fixtures and the table.")
    parser.add_argument("--only_table", action="store_true", help="Fixtures already written.")
    parser.add_argument("--extra", action="append", default=[],
                        help="NAME=PATH of another fixture to compare (e.g. a mutated tree's).")
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    paths = {name: os.path.join(args.out, f"{i}.json") for i, name in enumerate(FLAG_SETS)}
    if not args.only_table:
        print(f"load average before: {os.getloadavg()}", flush=True)
        for name, flags in FLAG_SETS.items():
            print(f"writing {name} ({flags or 'no extra flags'})", flush=True)
            write_fixture(paths[name], flags)
    paths.update(dict(e.split("=", 1) for e in args.extra))
    fixtures = {}
    for name, path in paths.items():
        with open(path) as f:
            fixtures[name] = json.load(f)
    base = next(iter(fixtures))
    lines = [f"Against `{base}`; relative difference |a − b| / (1 + |b|), the largest over the "
             "studies.", "", "| run | losses | test logits | batches, σ, ε equal |",
             "|---|---|---|---|"]
    for name, fixture in fixtures.items():
        s = spread(fixture, fixtures[base])
        lines.append(f"| {name} | {s['losses']:.1e} | {s['logits']:.1e} | "
                     f"{'yes' if s['exact'] else 'NO'} |")
    table = "\n".join(lines)
    print(table)
    with open(os.path.join(args.out, "spread.md"), "w") as f:
        f.write(table + "\n")


if __name__ == "__main__":
    main()
