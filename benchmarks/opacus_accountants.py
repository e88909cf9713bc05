"""Our accountants vs Opacus 1.6's RDP and PRV accountants on the papers' settings.

Opacus lives in its own virtual environment (``/work/venv-opacus``: torch 2.13.0
CPU, opacus 1.6.0), so the comparison runs in two steps from the repository root::

    /work/venv-opacus/bin/python benchmarks/opacus_accountants.py opacus \\
        --out /tmp/opacus_accountants.json
    /work/venv/bin/python -m benchmarks.opacus_accountants compare \\
        --opacus /tmp/opacus_accountants.json

The first step computes Opacus' ε at a grid of σ and Opacus' calibrated σ
(``get_noise_multiplier`` with its default ``epsilon_tolerance=0.01``, as a user
of Opacus would get) for every dataset of ``accounting/paper_settings.py`` with
the same q and number of steps; the second computes ours and prints Markdown.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import pathlib
import sys
import time
import warnings

SIGMAS = (0.7, 1.0, 2.0, 5.0, 20.0)
ROOT = pathlib.Path(__file__).resolve().parent.parent


def _paper_settings():
    # Loaded by path: the Opacus environment has no dp-accounting, so the
    # `accounting` package itself cannot be imported there.
    path = ROOT / "accounting" / "paper_settings.py"
    spec = importlib.util.spec_from_file_location("paper_settings", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up here
    spec.loader.exec_module(module)
    return module


def run_opacus(out: str) -> None:
    """Opacus' numbers for every paper setting, written as JSON to ``out``."""
    import opacus
    import torch
    from opacus.accountants import PRVAccountant, RDPAccountant
    from opacus.accountants.utils import get_noise_multiplier

    warnings.filterwarnings("ignore", message="Optimal order is the largest alpha")
    ps = _paper_settings()
    result = {"opacus": opacus.__version__, "torch": torch.__version__, "settings": []}
    for s in ps.PAPER_SETTINGS:
        entry = {
            "name": s.name,
            "q": s.q,
            "steps": s.steps,
            "delta": s.delta,
            "eps_at_sigma": {},
            "sigma_for_eps": {},
        }
        for sigma in SIGMAS:
            row = {}
            for name, cls in (("rdp", RDPAccountant), ("prv", PRVAccountant)):
                acc = cls()
                acc.history = [(sigma, s.q, s.steps)]
                start = time.perf_counter()
                row[name] = acc.get_epsilon(delta=s.delta)
                row[f"{name}_seconds"] = time.perf_counter() - start
            entry["eps_at_sigma"][repr(sigma)] = row
        for eps in ps.PAPER_EPSILONS:
            row = {}
            for name in ("rdp", "prv"):
                start = time.perf_counter()
                try:
                    row[name] = get_noise_multiplier(
                        target_epsilon=eps,
                        target_delta=s.delta,
                        sample_rate=s.q,
                        steps=s.steps,
                        accountant=name,
                    )
                except ValueError as err:  # Opacus: "The privacy budget is too low."
                    row[name] = None
                    row[f"{name}_error"] = str(err)
                row[f"{name}_seconds"] = time.perf_counter() - start
            entry["sigma_for_eps"][repr(eps)] = row
        result["settings"].append(entry)
        print(f"done: {s.name}", flush=True)
    pathlib.Path(out).write_text(json.dumps(result, indent=1))


def compare(opacus_json: str) -> None:
    """Prints our ε and σ next to Opacus' (Markdown)."""
    from maskdp_jax import accounting

    data = json.loads(pathlib.Path(opacus_json).read_text())
    print(
        f"Opacus {data['opacus']} (torch {data['torch']}); ours: dp-accounting RDP / PLD, "
        "special adjacency, decoupled sampling.\n"
    )
    print("ε at a given σ:\n")
    print("| dataset | σ | ours RDP | Opacus RDP | ours PLD | Opacus PRV | PRV − PLD |")
    print("|---|---|---|---|---|---|---|")
    for s in data["settings"]:
        kw = dict(q=s["q"], steps=s["steps"], delta=s["delta"])
        for sigma_key, row in s["eps_at_sigma"].items():
            sigma = float(sigma_key)
            rdp = accounting.epsilon(noise_multiplier=sigma, method="rdp", **kw)
            pld = accounting.epsilon(noise_multiplier=sigma, method="pld", **kw)
            print(
                f"| {s['name']} | {sigma:g} | {rdp:.4f} | {row['rdp']:.4f} | {pld:.4f} "
                f"| {row['prv']:.4f} | {row['prv'] - pld:+.4f} |"
            )
    print("\nσ reaching ε (Opacus: `get_noise_multiplier`, default `epsilon_tolerance=0.01`):\n")
    print("| dataset | ε | ours RDP | Opacus RDP | ours PLD | Opacus PRV | PRV σ / PLD σ − 1 |")
    print("|---|---|---|---|---|---|---|")
    for s in data["settings"]:
        kw = dict(q=s["q"], steps=s["steps"], delta=s["delta"])
        for eps_key, row in s["sigma_for_eps"].items():
            eps = float(eps_key)
            rdp = accounting.calibrate_noise_multiplier(target_epsilon=eps, method="rdp", **kw)
            pld = accounting.calibrate_noise_multiplier(target_epsilon=eps, method="pld", **kw)
            op_rdp = "unreachable" if row["rdp"] is None else f"{row['rdp']:.4f}"
            op_prv = "unreachable" if row["prv"] is None else f"{row['prv']:.4f}"
            ratio = "" if row["prv"] is None else f"{row['prv'] / pld - 1:+.2%}"
            print(
                f"| {s['name']} | {eps:g} | {rdp:.4f} | {op_rdp} | {pld:.4f} | {op_prv} | {ratio} |"
            )
    worst = max(row["prv_seconds"] for s in data["settings"] for row in s["eps_at_sigma"].values())
    print(f"\nSlowest Opacus PRV ε evaluation: {worst:.2f} s.")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="command", required=True)
    p_op = sub.add_parser("opacus", help="compute Opacus' numbers (Opacus venv)")
    p_op.add_argument("--out", required=True)
    p_cmp = sub.add_parser("compare", help="compare with ours (main venv)")
    p_cmp.add_argument("--opacus", required=True)
    args = parser.parse_args()
    if args.command == "opacus":
        run_opacus(args.out)
    else:
        compare(args.opacus)


if __name__ == "__main__":
    main()
