"""DP-CDA's calibrated noise and the seed's label flips at the sizes of Saha et al. 2024's datasets.

Run from the repository root (accounting only: no data is read; about 4 minutes)::

    python -m benchmarks.dpcda_scale

For each dataset size (N records, smallest class n_min, K = 10 classes), mixing order l and
target ε it calibrates σx with the seed's label noise σy = σx (``accounting.dpcda``: T = N draws,
δ = 1e-5, the rate l / n_min) and prints σ and the share of released labels the label noise
flips, P[argmax(e_k + σ·g) ≠ k] for g ~ N(0, I_K) (:func:`flip_rate`). The seed's data are
MNIST, FashionMNIST and CIFAR-10 (smallest classes: the size of the smallest class of each
training set); ``digits`` is our committed study's data, with its own clip norm.
"""

from __future__ import annotations

import math
from typing import NamedTuple

from scipy import integrate, stats

from maskdp_jax.accounting import dpcda


class Size(NamedTuple):
    name: str
    num_records: int  # N = T
    min_class_size: int  # n_min: the smallest class of the training set
    clip_norm: float  # c


SEED_SIZES = (
    Size("MNIST", 60_000, 5_421, 1.0),  # the smallest class: digit 5
    Size("FashionMNIST", 60_000, 6_000, 1.0),
    Size("CIFAR-10", 50_000, 5_000, 1.0),
    Size("digits (ours, c = 4)", 1_437, 130, 4.0),  # configs/dpcda_digits.py
)
EPSILONS = (5.0, 10.0)
ORDERS = (4, 16, 64)
NUM_CLASSES = 10
DELTA = 1e-5


def flip_rate(sigma: float, num_classes: int) -> float:
    """P[argmax(e_k + σ·g) ≠ k], g ~ N(0, I_K): the share of labels the seed's label noise flips.

    The label stays k iff σ·g_j < 1 + σ·g_k for every j ≠ k, so the rate is
    1 − ∫ φ(u) Φ(u + 1/σ)^{K−1} du.
    """
    if sigma == 0:
        return 0.0
    kept, _ = integrate.quad(lambda u: stats.norm.pdf(u) * stats.norm.cdf(u + 1.0 / sigma)
                             ** (num_classes - 1), -math.inf, math.inf, epsabs=1e-12)
    return max(0.0, 1.0 - kept)


def row(size: Size, *, order: int, epsilon: float, num_classes: int = NUM_CLASSES,
        delta: float = DELTA, renyi_orders=dpcda.DEFAULT_ORDERS) -> dict:
    """σ (σx = σy) calibrated to ``epsilon`` at ``size`` and order l, and its label-flip rate."""
    setup = dpcda.MixingSetup(order=order, clip_norm=size.clip_norm, num_classes=num_classes,
                              min_class_size=size.min_class_size, num_records=size.num_records,
                              num_synthetic=size.num_records, delta=delta)
    privacy = dpcda.calibrate_sigma_x(setup, target_epsilon=epsilon, sigma_ratio=1.0,
                                      orders=renyi_orders)
    return {"dataset": size.name, "order": order, "epsilon": epsilon, "sigma": privacy.sigma_x,
            "flip_rate": flip_rate(privacy.sigma_y, num_classes)}


def table(rows: list[dict], sizes=SEED_SIZES) -> str:
    """Markdown: one row per (dataset, ε), one column per l, "σ (flipped %)"."""
    orders = sorted({r["order"] for r in rows})
    cell = {(r["dataset"], r["epsilon"], r["order"]): r for r in rows}
    lines = ["| dataset | N | smallest class | c | ε | "
             + " | ".join(f"l = {o}: σ (flipped)" for o in orders) + " |",
             "|---|---|---|---|---|" + "---|" * len(orders)]
    for size in sizes:
        for eps in sorted({r["epsilon"] for r in rows if r["dataset"] == size.name}):
            cells = [cell[(size.name, eps, o)] for o in orders]
            lines.append(f"| {size.name} | {size.num_records:,} | {size.min_class_size:,} | "
                         f"{size.clip_norm:g} | {eps:g} | "
                         + " | ".join(f"{c['sigma']:.3f} ({100 * c['flip_rate']:.0f} %)"
                                      for c in cells) + " |")
    return "\n".join(lines)


def main() -> None:
    rows = [row(size, order=o, epsilon=e) for size in SEED_SIZES for e in EPSILONS
            for o in ORDERS]
    print(f"T = N, K = {NUM_CLASSES}, δ = {DELTA:g}, σy = σx, all draws composed:\n")
    print(table(rows))


if __name__ == "__main__":
    main()
