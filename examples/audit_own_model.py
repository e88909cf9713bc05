"""Audit a model trained by your own loop: LiRA membership inference with shadow models.

Trains shadow models of ``examples/own_model.py`` (each on a random half of the data, every
example IN exactly half of the models), scores every example on every model with the log-odds
confidence φ, and runs the offline and online likelihood-ratio attacks (Gu & Chen 2024's LiRA) with
the project's audit functions. Run from anywhere after ``pip install -e '.[audit]'``::

    python examples/audit_own_model.py --models 8 --steps 20 --mode dp

With a private mode the attacks' best ε lower bound (indicative: the trials share models and
examples) must stay below the ε the run promises.
"""

from __future__ import annotations

import argparse

import numpy as np
from own_model import SmallCNN, make_data, train  # the script beside this one

from maskdp_jax.audit import lira, metrics


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", type=int, default=8)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--examples", type=int, default=64)
    parser.add_argument("--mode", default="dp", choices=("maskdp", "dp", "nonprivate"))
    args = parser.parse_args()
    metrics.require_extra()  # before any shadow model trains
    images, labels, masks = make_data(args.examples)
    inclusion = lira.balanced_inclusion(np.random.default_rng(0), args.models, args.examples)
    scores, epsilon = [], float("inf")
    for m, members in enumerate(inclusion):
        idx = np.flatnonzero(members)
        params, mech, state = train(images[idx], labels[idx], masks[idx], mode=args.mode,
                                    steps=args.steps, batch_size=max(1, len(idx) // 4), seed=m,
                                    log=lambda _: None)
        epsilon, plan = mech.epsilon(state), mech.plan
        logits = SmallCNN().apply({"params": params}, images)
        scores.append(np.asarray(lira.log_odds_confidence(logits, labels)))
        print(f"shadow model {m + 1}/{args.models} trained (ε = {epsilon:.2f})")
    attacks = metrics.lira_attacks(np.stack(scores), inclusion, delta=plan.delta)
    for kind, figures in attacks.items():
        shown = ", ".join(f"{k} {v:.3f}" for k, v in figures.items() if isinstance(v, float))
        print(f"{kind} LiRA: {shown}")
    # The best of several attacks is a maximum over a family: Bonferroni over its size.
    level = 0.05 / len(attacks)
    best = max(metrics.bound_from_counts(a["bound_counts"], num_in=a["num_in"],
                                         num_out=a["num_out"], delta=a["delta"],
                                         significance=level) for a in attacks.values())
    print(f"promised ε = {epsilon:.2f} ({args.mode}); largest ε lower bound {best:.3f} "
          f"(indicative: pooled trials; the best of {len(attacks)} attacks, Bonferroni over them)")
    if best > epsilon:
        raise SystemExit("an attack certifies more leakage than the promised ε: a privacy bug")


if __name__ == "__main__":
    main()
