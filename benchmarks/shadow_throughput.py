r"""Shadow models per hour: the training step vmapped over M models against the same
models trained one at a time (train.py's step), compilation excluded.

    python benchmarks/shadow_throughput.py --finetune=full    # the embedded preset, from scratch
    python benchmarks/shadow_throughput.py --finetune=linear  # a linear probe (head only)
    python benchmarks/shadow_throughput.py --batch_size=8     # small batches (the LiRA audit's)

Each model trains on half of the embedded training set at the default run's batch size
(configs/default.py: mvit_cpu, B = 64 on N/2 = 512 videos, 16 epochs = 128 steps per model);
``--steps`` steps of every model are timed after one untimed call (compilation) and the
throughput is extrapolated to a whole shadow training: models per hour = 3600 / (seconds per
model-step x 128).
"""

import os
import sys
import time

import jax
import numpy as np
import optax
from absl import app, flags

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from maskdp_jax.audit import shadows  # noqa: E402
from maskdp_jax.configs import default  # noqa: E402
from maskdp_jax.core.plan import PrivacyPlan  # noqa: E402
from maskdp_jax.data import synthetic  # noqa: E402
from maskdp_jax.run import model as run_model  # noqa: E402

flags.DEFINE_enum("finetune", "full", ["full", "linear"], "Trainable part of mvit_cpu.")
flags.DEFINE_integer("models", 8, "Shadow models (one vmapped chunk).")
flags.DEFINE_integer("steps", 4, "Timed steps per model (after one compiling step).")
flags.DEFINE_integer("num_videos", 1024, "Embedded training videos (each model sees half).")
flags.DEFINE_integer("batch_size", 64, "Expected batch B of a model (physical batch: B + 2 std).")


def main(argv):
    del argv
    f = flags.FLAGS
    config = default.get_config()
    config.model.finetune = f.finetune
    config.batch_size = f.batch_size
    config.physical_batch_size = int(np.ceil(f.batch_size + 2 * np.sqrt(f.batch_size)))
    train, _ = synthetic.make_splits(num_train=f.num_videos, num_test=8)
    data = train.get_batch(np.arange(f.num_videos))
    built = run_model.build(config.model, num_classes=train.num_classes, seed=config.seed)
    trainable, frozen, apply_fn = built.trainable, built.frozen, built.apply_fn
    tx = optax.adam(config.optimizer.learning_rate)
    inclusion = shadows.complementary_inclusion(np.random.default_rng(0), f.models, f.num_videos)
    full_plan = PrivacyPlan.calibrate(mode="maskdp", num_examples=f.num_videos // 2,
                                      batch_size=config.batch_size, epochs=16.0,
                                      l2_clip_norm=config.privacy.l2_clip_norm, delta=1e-5,
                                      target_epsilon=1.0)
    print(f"machine: {os.cpu_count()} CPU cores; mvit_cpu ({f.finetune}), {f.models} models, "
          f"B = {config.batch_size} on N/2 = {f.num_videos // 2}, {full_plan.steps} steps per "
          "shadow training")
    results = {}
    for batching in ("vmap", "loop"):
        seconds = []
        for steps in (1, f.steps):  # the first call compiles (the step reads no plan.steps)
            plan = PrivacyPlan(mode="maskdp", num_examples=full_plan.num_examples,
                               batch_size=full_plan.batch_size, steps=steps,
                               l2_clip_norm=full_plan.l2_clip_norm,
                               noise_multiplier=full_plan.noise_multiplier, delta=1e-5)
            setup = shadows.ShadowSetup(plan=plan,
                                        physical_batch_size=config.physical_batch_size)
            start = time.perf_counter()
            out = shadows.train(setup, inclusion, data, trainable=trainable, frozen=frozen,
                                apply_fn=apply_fn, tx=tx, tokens=built.tokenizer(),
                                batching=batching, chunk=f.models)
            jax.block_until_ready(out)
            seconds.append(time.perf_counter() - start)
        per_model_step = seconds[1] / (f.steps * f.models)
        results[batching] = per_model_step
        print(f"{batching}: first call (compiling) {seconds[0]:.0f} s; {1e3 * per_model_step:.0f} "
              f"ms per model-step -> {3600 / (per_model_step * full_plan.steps):.1f} shadow "
              "models per hour")
    print(f"vmap / loop throughput: {results['loop'] / results['vmap']:.2f}x")


if __name__ == "__main__":
    app.run(main)
