r"""Median time of one logical training step of the default config, compilation excluded.

    python benchmarks/step_time.py --mode=maskdp             # every core
    taskset -c 0 python benchmarks/step_time.py --mode=maskdp  # one core (a sweep's --workers)

Also prints the host time to assemble one logical batch (sampling, clip cutting, gathering).
"""

import os
import sys
import time

import jax
import numpy as np
from absl import app, flags, logging

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from maskdp_jax import train  # noqa: E402
from maskdp_jax.configs import default  # noqa: E402
from maskdp_jax.core.mechanism import Mechanism  # noqa: E402
from maskdp_jax.core.plan import PrivacyPlan  # noqa: E402
from maskdp_jax.core.randomness import Randomness  # noqa: E402
from maskdp_jax.core.train_step import PixelViews, TrainState, make_train_step  # noqa: E402
from maskdp_jax.run import datasets as run_datasets  # noqa: E402
from maskdp_jax.run import model as run_model  # noqa: E402

flags.DEFINE_enum("mode", "maskdp", ["maskdp", "dp", "nonprivate"], "Training mode.")
flags.DEFINE_integer("steps", 10, "Timed steps (after one compiling step).")


def main(argv):
    del argv
    logging.set_verbosity(logging.WARNING)
    mode = flags.FLAGS.mode
    config = default.get_config(mode)  # the default's run of that mode, at its tuned settings
    train_ds, _ = run_datasets.get_datasets(config.input, mode=mode)
    built = run_model.build(config.model, num_classes=train_ds.num_classes, seed=0)
    trainable, frozen, apply_fn = built.trainable, built.frozen, built.apply_fn
    n = len(train_ds)
    tx = train.build_optimizer(config, steps=256, steps_per_epoch=n / config.batch_size)
    plan = PrivacyPlan.calibrate(
        mode=mode, num_examples=n, batch_size=config.batch_size, epochs=config.num_epochs,
        l2_clip_norm=config.privacy.l2_clip_norm, delta=config.privacy.delta,
        noise_multiplier=None if mode == "nonprivate" else 3.0, sampling=config.sampling)
    mechanism = Mechanism(plan=plan, randomness=Randomness(mode="seeded", seed=0))
    state = TrainState.create(trainable=trainable, frozen=frozen, tx=tx, mechanism=mechanism)
    tokens = built.tokenizer(fill_value=config.fill_value)
    step_fn = make_train_step(apply_fn=apply_fn, tx=tx, mechanism=mechanism,
                              views=PixelViews(tokens), pixel_norm=train_ds.pixel_norm)

    def batch_at(step):
        return train.load_logical_batch(train_ds, mechanism.batch_at(step), config=config,
                                        step=step)

    state, _ = step_fn(state, batch_at(0))  # compiles
    jax.block_until_ready(state)
    host, times = [], []
    for step in range(1, flags.FLAGS.steps + 1):
        t0 = time.perf_counter()
        batch = batch_at(step)
        host.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        state, _ = step_fn(state, batch)
        jax.block_until_ready(state)
        times.append(time.perf_counter() - t0)
    print(f"{mode}: {len(os.sched_getaffinity(0))} CPU(s), median step "
          f"{1e3 * np.median(times):.0f} ms, host batch {1e3 * np.median(host):.0f} ms "
          f"({config.model.name}, B={config.batch_size}, physical {config.physical_batch_size})")


if __name__ == "__main__":
    app.run(main)
