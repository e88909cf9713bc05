"""MaskDP on your own data in the papers' regime, with the control that says whether it pays:
scikit-learn's handwritten digits.

Each image is a 16×16 canvas: a digit (8×8, from ``sklearn.datasets.load_digits``) at a random
place, public (think: a synthetic avatar that replaced a person), on a private background (think:
the room, a face, a licence plate: whatever identifies someone and is not the label). That is the
papers' regime: the label lives in the public part, and so public-only training, which reads
no private pixel, is the baseline MaskDP must beat (here it does not). The protocol is theirs:

1. **Public pretraining.** Half of the digits, shown whole and labelled by another task (is the
   digit 5 or more?), train the network without DP; its head is dropped.
2. **Private fine-tuning** of the whole network on the other half with a fresh 10-class head:
   MaskDP (public part without noise, private part with DP-SGD) or DP-SGD on the whole image, both
   at the same ε; without DP, the ceiling; and the public views alone (``public_only``, ε = 0:
   no private pixel read), the control that says what MaskDP's private pass adds.
3. **Evaluation on whole held-out images**, the way the model is used; the public view (the digit,
   every other cell filled as MaskDP's public pass sees it) is printed beside it as a diagnostic.

Run from anywhere after ``pip install -e .``::

    python examples/digits.py                 # 3 seeds, ε = 1: the numbers docs/api.md states
    python examples/digits.py --seeds 1 --epochs 2   # what CI runs
    python examples/digits.py --split=validation --fill=pattern   # how the fill was chosen
    python examples/digits.py --split=validation --private_lr=0     # how --private_lr was chosen

``--fill`` sets what MaskDP's public views (and ``public_only``'s) show in the cells they hide:
``backgrounds`` (the default), a fresh background of the same kind per image
(``Examples(fills=...)``), drawn independently of every private pixel, so it is public; or
``pattern``, the tokeniser's fixed texture. ``backgrounds`` won on the validation split
(``docs/results/digits_fill/``). ``--private_lr`` gives MaskDP an optimiser per pass
(``mdp.per_pass``), its private pass at this learning rate, so the noise of the private pass no
longer sets the step of the public one; 0 is one optimiser on the summed gradient. 1e-3 had the
best mean on the validation split (``docs/results/digits_per_pass/``). ``--split=validation``
holds a third of the training half out and evaluates on it; the test split is then not read
(choose settings there, report on test once).

It prints one line per run, the mean of each mode and MaskDP − max(public-only, DP): MaskDP
has earned its private pass on your data where that is above 0 on your validation split.
"""

from __future__ import annotations

import argparse
import functools

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax
from sklearn.datasets import load_digits

import maskdp_jax as mdp

SIZE, DIGIT, CELL = 16, 8, 4  # canvas, digit and token-cell sizes (pixels)


class CNN(nn.Module):
    """A patchify stem (one token per 4×4 cell: ``patch_size`` declares the grid) and two
    convolutions; ``num_classes`` outputs."""

    num_classes: int
    patch_size: tuple[int, int] = (CELL, CELL)

    @nn.compact
    def __call__(self, x):  # [B, 16, 16, 1] -> [B, classes]
        x = nn.gelu(nn.Conv(32, self.patch_size, strides=self.patch_size, name="stem")(x))
        x = nn.gelu(nn.Conv(32, (3, 3), name="conv")(x))
        return nn.Dense(self.num_classes, name="head")(x.reshape(len(x), -1))


def backgrounds(n: int, rng: np.random.Generator) -> np.ndarray:
    """``[n, 16, 16, 1]`` float32 backgrounds of random 2×2 blobs (a texture, not pixel noise)."""
    background = np.kron(rng.normal(0.0, 1.0, (n, SIZE // 2, SIZE // 2)), np.ones((2, 2)))
    return 0.5 * background[..., None].astype(np.float32)


def compose(digits: np.ndarray, rng: np.random.Generator):
    """Canvases ``[N, 16, 16, 1]`` float32 (the digit at a cell-aligned random place on a private
    background of random blobs) and masks ``[N, 16, 16]`` (1 = the digit's 8×8 box, public)."""
    n = len(digits)
    canvas = backgrounds(n, rng)
    masks = np.zeros((n, SIZE, SIZE), np.uint8)
    places = rng.integers(0, (SIZE - DIGIT) // CELL + 1, (n, 2)) * CELL
    for i, (y, x) in enumerate(places):
        canvas[i, y:y + DIGIT, x:x + DIGIT, 0] = digits[i] / 16.0 * 4.0 - 1.0
        masks[i, y:y + DIGIT, x:x + DIGIT] = 1
    return canvas, masks


def load(seed: int, split: str = "test"):
    """``(pretraining images and labels, private train split, evaluation split)``; the halves are
    disjoint, and the split is seeded. ``split="validation"``: a third of the training split is
    held out and evaluated on instead of the test split (the training split shrinks by it)."""
    images, labels = load_digits(return_X_y=True)
    images = images.reshape(-1, DIGIT, DIGIT)
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(labels))
    public, private = order[: len(order) // 2], order[len(order) // 2:]
    test, train = private[: len(private) // 3], private[len(private) // 3:]
    pre_x, _ = compose(images[public], rng)
    parts = {}
    for name, idx in (("train", train), ("test", test)):
        x, m = compose(images[idx], rng)
        parts[name] = (x, labels[idx].astype(np.int32), m)
    if split == "validation":  # the test split is composed (the same draws) but not returned
        held = len(train) // 3
        parts["validation"] = tuple(a[:held] for a in parts["train"])
        parts["train"] = tuple(a[held:] for a in parts["train"])
    return (pre_x, (labels[public] >= 5).astype(np.int32)), parts["train"], parts[split]


def pretrain(images, labels, *, epochs: int, seed: int):
    """The public pretraining (no DP: the corpus is public); returns the parameters without
    the head."""
    model = CNN(num_classes=2)
    params = model.init(jax.random.key(seed), images[:1])["params"]
    tx = optax.adam(3e-3)
    opt = tx.init(params)

    @jax.jit
    def step(params, opt, x, y):
        def loss(p):
            logits = model.apply({"params": p}, x)
            return optax.softmax_cross_entropy_with_integer_labels(logits, y).mean()
        grads = jax.grad(loss)(params)
        updates, opt = tx.update(grads, opt, params)
        return optax.apply_updates(params, updates), opt

    rng = np.random.default_rng(seed)
    for _ in range(epochs):
        for batch in np.array_split(rng.permutation(len(labels)), max(1, len(labels) // 64)):
            params, opt = step(params, opt, images[batch], labels[batch])
    return {k: v for k, v in params.items() if k != "head"}


def finetune(backbone, data, *, mode: str, epsilon: float, epochs: int, seed: int,
             fills: np.ndarray | None = None, private_lr: float | None = None):
    """Fine-tune ``backbone`` with a fresh 10-class head on the private split; returns
    ``(params, ε spent)``. ``fills``: ``[N, 16, 16, 1]`` public pixels the views show in hidden
    cells (modes with views only; None: the tokeniser's pattern). ``private_lr``: MaskDP with an
    optimiser per pass, the private one at this learning rate (None: one optimiser)."""
    images, labels, masks = data
    fills = fills if mdp.Mode(mode).uses_views else None
    model = CNN(num_classes=10)
    # A copy: the step takes its parameters' buffers, and the backbone serves every mode.
    params = jax.tree.map(jnp.copy, {**model.init(jax.random.key(seed + 1), images[:1])["params"],
                                     **backbone})
    batch_size = 64
    steps = epochs * len(images) // batch_size
    plan = mdp.PrivacyPlan.calibrate(
        mode=mode, num_examples=len(images), batch_size=batch_size, steps=steps,
        l2_clip_norm=1.0, delta=1e-5,  # well below 1/N = 1/600
        target_epsilon=epsilon if mdp.Mode(mode).is_private else None)
    # The mechanism owns the secret noise stream, the Poisson sampler and the ledger.
    per_pass = private_lr is not None and mode == "maskdp"
    mech = mdp.Mechanism(plan=plan, randomness=mdp.Randomness(
        mode="secret", seed=seed, secret=mdp.draw_secret()), per_pass=per_pass)
    tokens = mdp.tokenizer_for(model)
    # An optimiser per pass: the gradient is then mdp.PassGradients, each part its own Adam.
    tx = optax.adam(1e-3)
    tx = mdp.per_pass(tx, optax.adam(private_lr)) if per_pass else tx
    opt, state = tx.init(params), mech.init()

    def loss_fn(p, image, label):  # ONE example
        logits = model.apply({"params": p}, image[None])[0]
        return optax.softmax_cross_entropy_with_integer_labels(logits, label)

    # The step writes the new parameters, optimiser and mechanism state over the old ones
    # (donated: one copy in memory, and a loop that forgets to rebind them fails).
    @functools.partial(jax.jit, donate_argnums=(0, 1, 2))
    def step(params, opt, state, public, private):
        grad, state, _ = mech.gradient(loss_fn, params, state, public=public, private=private,
                                       tokens=tokens)
        updates, opt = tx.update(grad, opt, params)
        return optax.apply_updates(params, updates), opt, state

    def examples(indices):  # a Poisson draw, padded with weight-0 rows, never truncated
        if indices is None:  # the pass this mode does not have
            return None
        idx, weights = mdp.padded_indices(indices, multiple_of=32)
        return mdp.Examples(inputs=images[idx], targets=labels[idx], masks=masks[idx],
                            weights=weights, fills=None if fills is None else fills[idx])

    for _ in range(plan.steps):
        drawn = mech.batch(state)  # this step's draws, by the plan's sampling scheme
        params, opt, state = step(params, opt, state, examples(drawn.public),
                                  examples(drawn.private))
    return params, mech.epsilon(state)


def accuracy(params, images, labels) -> float:
    logits = CNN(num_classes=10).apply({"params": params}, images)
    return float(jnp.mean(jnp.argmax(logits, -1) == labels))


def main(argv=None) -> dict[str, list[float]]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--epsilon", type=float, default=1.0)
    parser.add_argument("--epochs", type=int, default=10, help="fine-tuning epochs")
    parser.add_argument("--pretrain_epochs", type=int, default=10)
    parser.add_argument("--split", choices=("test", "validation"), default="test",
                        help="evaluate on the test split, or on a third of the training half")
    parser.add_argument("--fill", choices=("pattern", "backgrounds"), default="backgrounds",
                        help="what the public views show in hidden cells (backgrounds: chosen "
                        "on the validation split)")
    parser.add_argument("--private_lr", type=float, default=1e-3,
                        help="MaskDP with an optimiser per pass, the private pass at this "
                        "learning rate (chosen on the validation split); 0: one optimiser on "
                        "the summed gradient, the papers' step")
    args = parser.parse_args(argv)
    if args.private_lr < 0:
        parser.error(f"--private_lr must be >= 0 (0: one optimiser); got {args.private_lr}")
    if args.split != "test" or args.fill != "backgrounds":
        print(f"evaluated on the {args.split} split, hidden cells filled with {args.fill}")
    if args.private_lr != parser.get_default("private_lr"):
        print("maskdp with one optimiser" if not args.private_lr else
              f"maskdp with an optimiser per pass, the private one at {args.private_lr:g}")
    found: dict[str, list[float]] = {"nonprivate": [], "public_only": [], "dp": [], "maskdp": []}
    for seed in range(args.seeds):
        (pre_x, pre_y), train, (test_x, test_y, test_m) = load(seed, args.split)
        backbone = pretrain(pre_x, pre_y, epochs=args.pretrain_epochs, seed=seed)
        # Fresh public backgrounds, drawn apart from every image's own (private) one.
        fill_rng = np.random.default_rng(10_000 + seed)
        fills, test_fills = (None, None) if args.fill == "pattern" else (
            backgrounds(len(train[0]), fill_rng), backgrounds(len(test_x), fill_rng))
        # The digit with every other cell filled, as MaskDP's public pass sees it.
        public_view = np.asarray(mdp.tokenizer_for(CNN(num_classes=10)).views(
            test_x, test_m, fill=test_fills).public)
        for mode in found:
            params, eps = finetune(backbone, train, mode=mode, epsilon=args.epsilon,
                                   epochs=args.epochs, seed=seed, fills=fills,
                                   private_lr=args.private_lr or None)
            acc = accuracy(params, test_x, test_y)
            found[mode].append(acc)
            print(f"seed {seed} {mode:11s} ε = {eps:.2f}: {args.split} accuracy {acc:.3f} on whole "
                  f"images (public view {accuracy(params, public_view, test_y):.3f})")
    for mode, values in found.items():
        print(f"{mode:11s} mean {np.mean(values):.3f} over {len(values)} seed(s)")
    best = max(("public_only", "dp"), key=lambda m: np.mean(found[m]))
    print(f"maskdp − max(public_only, dp) = "
          f"{100 * (np.mean(found['maskdp']) - np.mean(found[best])):+.1f} points ({best} the "
          "better baseline)")
    return found


if __name__ == "__main__":
    main()
