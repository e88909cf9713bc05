"""MaskDP in your own training loop: your Flax model, your arrays, your optimiser.

A small image CNN (not MViT) trained on in-memory images whose left half is public (say, a
synthetic avatar) and whose right half is private. Only the private half is protected by DP-SGD;
the public half trains without noise. Run from anywhere after ``pip install -e .``::

    python examples/own_model.py --steps 40

It prints the public loss and the ε spent so far, then the test accuracy.
"""

from __future__ import annotations

import argparse
import functools

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax

import maskdp_jax as mdp


class SmallCNN(nn.Module):
    """A patchify stem and one convolution; ``patch_size`` declares its token grid."""

    num_classes: int = 4
    patch_size: tuple[int, int] = (4, 4)

    @nn.compact
    def __call__(self, x):  # [B, H, W, C] -> [B, classes]
        x = nn.gelu(nn.Conv(16, self.patch_size, strides=self.patch_size)(x))
        x = nn.gelu(nn.Conv(16, (3, 3))(x))
        return nn.Dense(self.num_classes)(x.mean(axis=(1, 2)))


def make_data(num: int, *, seed: int = 0, num_classes: int = 4, size: int = 16):
    """Images ``[N, size, size, 3]`` whose class shows as a coloured bar in both halves, labels
    ``[N]`` and masks ``[N, size, size]`` (1 = public: the left half)."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(num_classes, size=num)
    images = rng.normal(0.0, 0.5, (num, size, size, 3)).astype(np.float32)
    rows = (labels * size) // num_classes
    for i, (label, row) in enumerate(zip(labels, rows, strict=True)):
        images[i, row:row + size // num_classes, :, label % 3] += 2.0
    masks = np.zeros((num, size, size), np.uint8)
    masks[:, :, : size // 2] = 1
    return images, labels.astype(np.int32), masks


def train(images, labels, masks, *, mode="maskdp", steps=40, batch_size=32,
          target_epsilon=4.0, seed=0, log=print):
    """Train :class:`SmallCNN` with MaskDP; returns ``(params, mechanism, state)``
    (``mechanism.epsilon(state)`` is the ε spent)."""
    model = SmallCNN()
    params = model.init(jax.random.key(seed), images[:1])["params"]
    tokens = mdp.tokenizer_for(model)
    plan = mdp.PrivacyPlan.calibrate(
        mode=mode, num_examples=len(images), batch_size=batch_size, steps=steps,
        l2_clip_norm=1.0, delta=1e-5,  # well below 1/N: δ >= 1/N is refused
        target_epsilon=None if mode == "nonprivate" else target_epsilon)
    # The mechanism owns the secret noise stream, the Poisson sampler and the ledger.
    mech = mdp.Mechanism(plan=plan, randomness=mdp.Randomness(
        mode="secret", seed=seed, secret=mdp.draw_secret()))
    tx = optax.adam(3e-3)
    opt_state, state = tx.init(params), mech.init()

    def loss_fn(p, image, label):  # ONE example: image [H, W, C], label []
        logits = model.apply({"params": p}, image[None])[0]
        return optax.softmax_cross_entropy_with_integer_labels(logits, label)

    # The step writes the new parameters, optimiser and mechanism state over the old ones
    # (donated: one copy in memory, and a loop that forgets to rebind them fails).
    @functools.partial(jax.jit, donate_argnums=(0, 1, 2))
    def step(params, opt_state, state, public, private):
        grad, state, stats = mech.gradient(loss_fn, params, state, public=public,
                                           private=private, tokens=tokens, microbatch_size=8)
        updates, opt_state = tx.update(grad, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, state, stats

    def examples(indices):  # a Poisson draw, padded with weight-0 rows, never truncated
        if indices is None:  # the pass this mode does not have
            return None
        idx, weights = mdp.padded_indices(indices, multiple_of=8)
        return mdp.Examples(inputs=images[idx], targets=labels[idx], masks=masks[idx],
                            weights=weights)

    for t in range(plan.steps):
        drawn = mech.batch(state)  # this step's draws, by the plan's sampling scheme
        params, opt_state, state, stats = step(params, opt_state, state,
                                               examples(drawn.public), examples(drawn.private))
        if (t + 1) % 10 == 0 or t + 1 == plan.steps:
            loss = float(stats.public_loss_sum / jnp.maximum(stats.public_count, 1.0))
            log(f"step {t + 1}/{plan.steps}: public loss {loss:.3f}, "
                f"ε = {mech.epsilon(state):.2f} at δ = {plan.delta}")
    return params, mech, state


def accuracy(params, images, labels) -> float:
    logits = SmallCNN().apply({"params": params}, images)
    return float(jnp.mean(jnp.argmax(logits, -1) == labels))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--mode", default="maskdp", choices=("maskdp", "dp", "nonprivate"))
    args = parser.parse_args()
    images, labels, masks = make_data(512)
    params, _, _ = train(images, labels, masks, mode=args.mode, steps=args.steps)
    test_images, test_labels, _ = make_data(256, seed=1)
    print(f"test accuracy: {accuracy(params, test_images, test_labels):.3f}")


if __name__ == "__main__":
    main()
