r"""Per-step cost of fine-tuning strategies: the gradient is taken only w.r.t. trainable parameters.

    /work/venv/bin/python benchmarks/finetune_cost.py --model mvit_v2_s --batch 1 --repeats 3

For each strategy (default: ``selective`` with k=2, the MaskDP paper's setting, and ``full``) this
times the DP gradient of one physical batch, ``maskdp_jax.core.clipping.clipped_grad_sum``
(per-example gradients w.r.t. the trainable subtree, clipped, summed), jitted, on the same random
clip(s) and the same random weights; plus the forward pass alone as the floor. Frozen parameters are
closed over, so with ``selective`` backprop stops at block 14: the step should cost little more than
a forward. Prints compile and mean run seconds and the ratio selective / full measured in this one
run.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import optax  # noqa: E402
from flax import traverse_util  # noqa: E402

from maskdp_jax import models  # noqa: E402
from maskdp_jax.core import clipping, partition  # noqa: E402


def random_params(model, input_shape, seed: int):
    """Random weights of the right shapes (LayerNorm scales 1): timing does not depend on values,
    and this avoids compiling ``model.init``."""
    shapes = jax.eval_shape(model.init, jax.random.key(0), jnp.zeros((1, *input_shape)))["params"]
    rng = np.random.default_rng(seed)
    flat = {p: (np.ones(s.shape, np.float32) if p[-1] == "scale"
                else (0.02 * rng.standard_normal(s.shape)).astype(np.float32))
            for p, s in traverse_util.flatten_dict(shapes).items()}
    return jax.tree.map(jnp.asarray, traverse_util.unflatten_dict(flat))


def timed(fn, *args, repeats: int):
    t = time.perf_counter()
    jax.block_until_ready(fn(*args))
    first = time.perf_counter() - t
    runs = []
    for _ in range(repeats):
        t = time.perf_counter()
        jax.block_until_ready(fn(*args))
        runs.append(time.perf_counter() - t)
    return first, float(np.mean(runs)), float(np.std(runs))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default="mvit_v2_s")
    parser.add_argument("--batch", type=int, default=1, help="examples per physical batch")
    parser.add_argument("--classes", type=int, default=60)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--strategies", default="selective,full")
    args = parser.parse_args()

    model = models.get_model(args.model, num_classes=args.classes)
    input_shape = (*model.input_size, 3)
    params = random_params(model, input_shape, seed=0)
    rng = np.random.default_rng(1)
    videos = jnp.asarray(rng.standard_normal((args.batch, *input_shape)), jnp.float32)
    labels = jnp.asarray(rng.integers(0, args.classes, args.batch), jnp.int32)
    weights = jnp.ones(args.batch, jnp.float32)
    print(f"{args.model}, batch {args.batch}, {models.finetune.count_params(params):,} parameters; "
          f"jax {jax.__version__} on {jax.devices()[0].platform}; {platform.processor() or ''}")

    forward = jax.jit(lambda p, v: model.apply({"params": p}, v))
    first, mean, std = timed(forward, params, videos, repeats=args.repeats)
    print(f"forward only      : compile+run {first:7.1f} s, run {mean:7.2f} +- {std:.2f} s")
    results = {}
    for strategy in args.strategies.split(","):
        mask = models.finetune.trainable_mask(params, strategy=strategy, num_last_blocks=2)
        trainable, frozen = partition.split(params, mask)

        def loss_fn(tr, example, frozen=frozen):
            logits = model.apply({"params": partition.merge(tr, frozen)}, example["video"][None])
            labels = example["label"][None]
            return optax.softmax_cross_entropy_with_integer_labels(logits, labels)[0]

        step = jax.jit(lambda tr, ex, w, loss_fn=loss_fn: clipping.clipped_grad_sum(
            loss_fn, tr, ex, w, l2_clip_norm=1.0))
        first, mean, std = timed(step, trainable, {"video": videos, "label": labels}, weights,
                                 repeats=args.repeats)
        results[strategy] = mean
        n = models.finetune.count_params(trainable)
        print(f"{strategy:9s} ({n:>10,} trainable): compile+run {first:7.1f} s, "
              f"run {mean:7.2f} +- {std:.2f} s")
    if "selective" in results and "full" in results:
        print(f"selective / full step time: {results['selective'] / results['full']:.3f}")


if __name__ == "__main__":
    main()
