"""Timing and accuracy of the accountants on the NTU RGB+D 150-epoch setting.

Run from the repository root::

    /work/venv/bin/python -m benchmarks.accounting_timing

For each ε of the papers' table it calibrates σ by PLD and by RDP and then
computes ε(σ), each from a cold cache, and for a few σ it compares our PLD ε with
dp-accounting's PLD accountant on a fine grid (interval 1e-5, slow) to show the
pessimism of our adaptive grid. All times are wall-clock seconds on this machine.
"""

from __future__ import annotations

import os
import platform
import subprocess
import time
from importlib import metadata

from dp_accounting import NeighboringRelation
from dp_accounting.pld import PLDAccountant

from maskdp_jax import accounting
from maskdp_jax.accounting import accountant, events, paper_settings

NTU = paper_settings.PAPER_SETTINGS[0]
REFERENCE_INTERVAL = 1e-5


def _timed(fn):
    accountant.clear_caches()
    start = time.perf_counter()
    value = fn()
    return value, time.perf_counter() - start


def _machine() -> str:
    cpu = "unknown CPU"
    try:
        lscpu = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
        for line in lscpu.splitlines():
            if line.startswith("Model name:"):
                cpu = line.split(":", 1)[1].strip()
    except (OSError, subprocess.CalledProcessError):
        pass
    return (
        f"{cpu}, {os.cpu_count()} CPUs visible; Python {platform.python_version()}; dp-accounting "
        f"{metadata.version('dp-accounting')}; numpy {metadata.version('numpy')}"
    )


def main() -> None:
    print(f"Machine: {_machine()}\n")
    print(
        f"Setting: {NTU.name}, N={NTU.num_examples}, q={NTU.q:.6g}, steps={NTU.steps}, "
        f"δ={NTU.delta:g}, special adjacency, decoupled sampling.\n"
    )
    print(
        "| target ε | σ (PLD) | calibrate PLD [s] | ε PLD(σ) [s] | PLD grid | σ (RDP) "
        "| calibrate RDP [s] | ε RDP(σ) [s] |"
    )
    print("|---|---|---|---|---|---|---|---|")
    sigmas = {}
    kw = dict(q=NTU.q, steps=NTU.steps, delta=NTU.delta)
    for target in paper_settings.PAPER_EPSILONS:
        sig_pld, t_cal_pld = _timed(
            lambda t=target: accounting.calibrate_noise_multiplier(target_epsilon=t, **kw)
        )
        eps_pld, t_pld = _timed(lambda s=sig_pld: accounting.epsilon(noise_multiplier=s, **kw))
        sig_rdp, t_cal_rdp = _timed(
            lambda t=target: accounting.calibrate_noise_multiplier(
                target_epsilon=t, method="rdp", **kw
            )
        )
        _, t_rdp = _timed(
            lambda s=sig_rdp: accounting.epsilon(noise_multiplier=s, method="rdp", **kw)
        )
        seg = events.Segment(NTU.q, sig_pld, NTU.steps)
        grid = accountant.pld_interval((seg,), NTU.delta, "special", "decoupled")
        sigmas[target] = (sig_pld, eps_pld)
        print(
            f"| {target:g} | {sig_pld:.4f} | {t_cal_pld:.2f} | {t_pld:.2f} | {grid:.2g} "
            f"| {sig_rdp:.4f} | {t_cal_rdp:.2f} | {t_rdp:.2f} |"
        )

    print(
        f"\nAccuracy: our PLD ε vs dp-accounting's PLDAccountant with interval "
        f"{REFERENCE_INTERVAL:g} (both pessimistic upper bounds).\n"
    )
    print("| σ | ε ours | ε fine grid | relative excess | fine grid [s] |")
    print("|---|---|---|---|---|")
    for target in (0.1, 1.0, 10.0):
        sigma, ours = sigmas[target]
        start = time.perf_counter()
        ref = PLDAccountant(NeighboringRelation.REPLACE_SPECIAL, REFERENCE_INTERVAL)
        ref.compose(events.decoupled_event((events.Segment(NTU.q, sigma, NTU.steps),)))
        fine = ref.get_epsilon(NTU.delta)
        elapsed = time.perf_counter() - start
        print(f"| {sigma:.4f} | {ours:.5f} | {fine:.5f} | {ours / fine - 1:.1e} | {elapsed:.1f} |")

    print("\nFor comparison, dp-accounting's PLDAccountant at its default interval 1e-4:\n")
    print("| σ | ε default grid | ε ours | default grid [s] |")
    print("|---|---|---|---|")
    for sigma in (sigmas[0.1][0], sigmas[10.0][0], 0.5):
        start = time.perf_counter()
        ref = PLDAccountant(NeighboringRelation.REPLACE_SPECIAL)
        ref.compose(events.decoupled_event((events.Segment(NTU.q, sigma, NTU.steps),)))
        default = ref.get_epsilon(NTU.delta)
        elapsed = time.perf_counter() - start
        ours = accounting.epsilon(noise_multiplier=sigma, **kw)
        print(f"| {sigma:.4f} | {default:.5f} | {ours:.5f} | {elapsed:.2f} |")

    print("\nProgress-bar use: Ledger.epsilon (PLD) after each of 5 single recorded steps")
    ledger = accounting.Ledger()
    ledger.record(q=NTU.q, noise_multiplier=sigmas[1.0][0], steps=NTU.steps // 2)
    times = []
    for _ in range(5):
        ledger.record(q=NTU.q, noise_multiplier=sigmas[1.0][0])
        start = time.perf_counter()
        ledger.epsilon(delta=NTU.delta)
        times.append(time.perf_counter() - start)
    print("seconds: " + ", ".join(f"{t:.2f}" for t in times))


if __name__ == "__main__":
    main()
