"""Privacy accounting for MaskDP: σ for a target ε, ε after N steps, and the masked adjacencies.

Run from anywhere after ``pip install -e .`` (not named accounting.py: a script of that name
would shadow the accounting package it calls)::

    python examples/privacy_accounting.py

It prints σ for ε = 1, ε of that σ after the planned steps by the RDP and the PLD accountant
under both masked adjacencies (``special``: one video's private part present or absent;
``replace``: the private part replaced), and checks that ``python -m maskdp_jax.accounting`` prints
the same numbers.
"""

from __future__ import annotations

import re
import subprocess
import sys

import maskdp_jax as mdp
from maskdp_jax import accounting

N, B, STEPS, DELTA = 2000, 40, 200, 1e-5


def main() -> None:
    plan = mdp.PrivacyPlan.calibrate(mode="maskdp", num_examples=N, batch_size=B, steps=STEPS,
                                     l2_clip_norm=1.0, delta=DELTA, target_epsilon=1.0)
    print(plan.summary())
    ledger = mdp.Ledger()
    ledger.record(q=plan.q, noise_multiplier=plan.noise_multiplier, steps=STEPS)
    ours = {}
    for adjacency in ("special", "replace"):
        for method in ("rdp", "pld"):
            reason = accounting.unsupported_reason(method, adjacency=adjacency,
                                                   sampling=plan.sampling)
            if reason:
                print(f"ε[{method}, {adjacency}]: not accounted. {reason}")
                continue
            ours[adjacency, method] = ledger.epsilon(delta=DELTA, method=method,
                                                     adjacency=adjacency, sampling=plan.sampling)
            print(f"ε[{method}, {adjacency}] after {STEPS} steps at σ = "
                  f"{plan.noise_multiplier:.4f}: {ours[adjacency, method]:.4f}")

    # The same numbers from the command line.
    for adjacency in ("special", "replace"):
        out = subprocess.run(
            [sys.executable, "-m", "maskdp_jax.accounting", "epsilon", "--sigma",
             repr(plan.noise_multiplier), "--q", repr(plan.q), "--steps", str(STEPS),
             "--delta", repr(DELTA), "--method", "both", "--adjacency", adjacency],
            check=True, capture_output=True, text=True).stdout
        for method, value in re.findall(r"epsilon\[(\w+)\] = ([0-9.]+)", out):
            if (adjacency, method) in ours and abs(float(value) - ours[adjacency, method]) > 1e-4:
                raise SystemExit(f"python -m maskdp_jax.accounting gives "
                                 f"ε[{method}, {adjacency}] = {value}, "
                                 f"the library {ours[adjacency, method]:.5f}")
        print(f"python -m maskdp_jax.accounting epsilon --adjacency {adjacency}: the same ε")


if __name__ == "__main__":
    main()
