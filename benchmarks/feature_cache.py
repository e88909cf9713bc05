r"""Epoch time with and without the frozen-prefix feature cache, and the cache's disk bytes.

    python -m benchmarks.feature_cache                          # mvit_v2_s, 60 classes, maskdp
    python -m benchmarks.feature_cache --preset=mvit_tiny --videos=16 --batch=8 --size=32

Generated videos (``data.synthetic`` at the preset's clip size), the preset with a ``--classes``
head, random weights, ``selective`` fine-tuning of the last ``--last_blocks`` blocks (the papers'
setting) or another ``--strategy``. One epoch = ``videos / batch`` MaskDP (or ``--mode``) steps
of ``batch`` videos, each a physical batch used by both passes (public and private, as
``maskdp`` does with coupled sampling; the work per step is the same as with Poisson batches of
that size). It prints:

* without the cache: the first step (compilation) and the median of ``--epochs`` epochs, clips
  decoded from the generated uint8 frames as ``train.py`` loads them;
* with the cache: the time to write it (one prefix pass over ``--grid`` clips per video and
  view, compilation included), then the same;
* the cache's bytes per clip (every view) and on disk in total.

Results: docs/benchmarks.md, "Feature cache".
"""

from __future__ import annotations

import argparse
import os
import platform
import tempfile
import time

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import optax

from maskdp_jax import models
from maskdp_jax.core import partition
from maskdp_jax.core.mechanism import Mechanism
from maskdp_jax.core.plan import PrivacyPlan
from maskdp_jax.core.randomness import Randomness
from maskdp_jax.core.tokenizer import Tokenizer
from maskdp_jax.core.train_step import LogicalBatchData, PixelViews, TrainState, make_train_step
from maskdp_jax.data import synthetic
from maskdp_jax.models import finetune
from maskdp_jax.run import features
from maskdp_jax.run import model as run_model


def _epochs(step, state, batch_at, *, steps: int, epochs: int) -> tuple[float, float]:
    """``(first step seconds, median epoch seconds)``; the first step compiles. ``state`` is
    copied (a step consumes the state it is given)."""
    state = jax.tree.map(jnp.copy, state)
    t = time.perf_counter()
    state, _ = step(state, batch_at(0))
    jax.block_until_ready(state)
    first = time.perf_counter() - t
    times = []
    for e in range(epochs):
        t = time.perf_counter()
        for s in range(steps):
            state, _ = step(state, batch_at(1 + e * steps + s))
        jax.block_until_ready(state)
        times.append(time.perf_counter() - t)
    return first, float(np.median(times))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="mvit_v2_s")
    parser.add_argument("--classes", type=int, default=60)
    parser.add_argument("--mode", default="maskdp", choices=("maskdp", "dp", "nonprivate"))
    parser.add_argument("--videos", type=int, default=8, help="N, training videos")
    parser.add_argument("--batch", type=int, default=4, help="videos per step")
    parser.add_argument("--grid", type=int, default=2, help="G, cached clips per video")
    parser.add_argument("--epochs", type=int, default=2, help="timed epochs per setting")
    parser.add_argument("--strategy", default="selective",
                        choices=("selective", "linear", "norms", "adapters"))
    parser.add_argument("--last_blocks", type=int, default=2, help="k of selective")
    parser.add_argument("--dtype", default="float32", choices=("float32", "bfloat16"),
                        help="the cache's dtype on disk")
    parser.add_argument("--compute_dtype", default="float32", choices=("float32", "bfloat16"),
                        help="the model's products (train.py's compute.dtype)")
    args = parser.parse_args()

    model = models.get_model(args.preset, num_classes=args.classes,
                             dtype=run_model.COMPUTE_DTYPES[args.compute_dtype])
    frames, size = model.input_size[0], model.input_size[1]
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPU cores, "
          f"jax {jax.__version__} on {jax.default_backend()}; {args.preset} with "
          f"{args.classes} classes, {args.strategy}"
          f"{f' k={args.last_blocks}' if args.strategy == 'selective' else ''}, {args.mode}, "
          f"N={args.videos}, {args.batch} videos per step, "
          f"G={args.grid}, {args.dtype} cache, {args.compute_dtype} compute")
    train_ds, _ = synthetic.make_splits(num_train=max(args.videos, 8), num_test=8,
                                        frames=frames + 8, clip_frames=frames, size=size)
    params = run_model.init_params(model, input_shape=(frames, size, size, 3),
                               key=jax.random.key(0))
    mask = finetune.trainable_mask(params, strategy=args.strategy,
                                   num_last_blocks=args.last_blocks)
    trainable, frozen = partition.split(params, mask)
    tokens = Tokenizer(patch_stride=tuple(model.patch_stride))
    steps = args.videos // args.batch
    plan = PrivacyPlan(mode=args.mode, num_examples=args.videos, batch_size=args.batch,
                       steps=1 + args.epochs * steps, l2_clip_norm=1.0,
                       noise_multiplier=0.0 if args.mode == "nonprivate" else 1.0, delta=1e-5)
    mechanism = Mechanism(plan=plan, randomness=Randomness(mode="seeded", seed=1))
    tx = optax.sgd(1e-3)
    state = TrainState.create(trainable=trainable, frozen=frozen, tx=tx, mechanism=mechanism)

    def logical(batch):
        batch = {**batch, "weight": np.ones(args.batch, np.float32)}
        return LogicalBatchData(public=[batch] if plan.mode.has_public_pass else [],
                                private=[batch] if plan.mode.has_private_pass else [])

    def rows(step):
        return (np.arange(args.batch) + step * args.batch) % args.videos

    pixel_step = make_train_step(apply_fn=lambda p, x: model.apply({"params": p}, x), tx=tx,
                                 mechanism=mechanism, views=PixelViews(tokens),
                                 pixel_norm=train_ds.pixel_norm)
    first, epoch = _epochs(
        pixel_step, state,
        lambda s: logical(train_ds.get_batch(rows(s), seed=[s], normalize=False)),
        steps=steps, epochs=args.epochs)
    print(f"| no cache | first step (compiles) {first:.1f} s | epoch {epoch:.2f} s |", flush=True)

    with tempfile.TemporaryDirectory() as root:
        config = ml_collections.ConfigDict({
            "mode": args.mode, "physical_batch_size": args.batch,
            "feature_cache": {"dir": os.path.join(root, "cache"), "clips_per_video": args.grid,
                              "dtype": args.dtype, "batch_size": args.batch}})
        t = time.perf_counter()
        cache, cut = features.open_or_build(config, train_ds=train_ds, model=model,
                                            params=params, trainable_mask=mask, tokens=tokens,
                                            workdir=root)
        build = time.perf_counter() - t
        cache_step = make_train_step(
            apply_fn=lambda p, h: model.apply({"params": p}, h, start_block=cut), tx=tx,
            mechanism=mechanism, views=features.cached_views)
        first_c, epoch_c = _epochs(
            cache_step, state, lambda s: logical(cache.get_batch(rows(s), seed=[s])),
            steps=steps, epochs=args.epochs)
        layout = cache.layout
        print(f"| cache (blocks {cut}.. of {len(model.blocks)} train) | first step (compiles) "
              f"{first_c:.1f} s | epoch {epoch_c:.2f} s |")
        print(f"cache written in {build:.1f} s (compilation included) for {args.videos} videos "
              f"x {args.grid} clips x {len(layout.views)} view(s); "
              f"{layout.bytes_per_clip() / 2**20:.2f} MiB per clip "
              f"({layout.tokens} tokens x {layout.dim} x {len(layout.views)} view(s), "
              f"{args.dtype}), {sum(layout.files().values()) / 2**20:.1f} MiB in all")
        print(f"epoch speed-up with the cache: {epoch / epoch_c:.1f}x; the cache pays for "
              f"itself after {build / max(epoch - epoch_c, 1e-9):.1f} epochs")
    stats = jax.devices()[0].memory_stats() or {}
    if "peak_bytes_in_use" in stats:  # an accelerator's allocator; the CPU keeps none
        print(f"peak device memory of this process: {stats['peak_bytes_in_use'] / 2**20:.0f} MiB")


if __name__ == "__main__":
    main()
