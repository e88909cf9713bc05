"""Scenario for tests/test_audit_shadows.py, run in a subprocess with two CPU devices
(``XLA_FLAGS=--xla_force_host_platform_device_count=2``; XLA reads its flags once, at start-up).

    python tests/shadow_cases.py OUT.npz

Trains the four shadow models of :func:`tiny` three ways and writes their trainable leaves as
``<way>_i``: ``loop``; ``vmap`` in chunks of 3 on one device (the last chunk padded); ``mesh``,
vmapped in chunks of 3 over the two devices (rounded up to 4, two models per device).
Not collected by pytest (no ``test_`` prefix); :func:`tiny` is also imported by the test.
"""

from __future__ import annotations

import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

CHUNK = 3
WAYS = {"loop": dict(batching="loop"), "vmap": dict(batching="vmap"),
        "mesh": dict(batching="vmap")}


def tiny():
    """Data, step collaborators, setup and inclusion of the tiny study (deterministic)."""
    import jax
    import optax
    from conftest import TinyVideoNet

    from maskdp_jax import models
    from maskdp_jax.audit import shadows
    from maskdp_jax.core import partition
    from maskdp_jax.core.plan import PrivacyPlan
    from maskdp_jax.core.tokenizer import Tokenizer
    from maskdp_jax.data import synthetic

    train, _ = synthetic.make_splits(num_train=16, num_test=8, frames=8, clip_frames=8, size=32)
    data = train.get_batch(np.arange(16))
    # The machinery under test (sampling, vmapped chunks, padding, the mesh) is the model's
    # caller; the conv net of tests/conftest.py compiles in seconds where mvit_test took minutes.
    model = TinyVideoNet(num_classes=train.num_classes)
    params = model.init(jax.random.key(0), np.zeros((1, *data["video"].shape[2:]), np.float32))
    trainable, frozen = partition.split(
        params["params"], models.finetune.trainable_mask(params["params"], strategy="full"))
    plan = PrivacyPlan(mode="maskdp", num_examples=8, batch_size=4, steps=2, l2_clip_norm=1.0,
                       noise_multiplier=1.0, delta=1e-3)
    common = dict(trainable=trainable, frozen=frozen, tx=optax.adam(1e-2),
                  apply_fn=lambda p, x: model.apply({"params": p}, x),
                  tokens=Tokenizer(patch_stride=tuple(model.patch_stride)))
    setup = shadows.ShadowSetup(plan=plan, physical_batch_size=4, seed=0)
    inc = shadows.complementary_inclusion(np.random.default_rng(0), 4, 16)
    return data, common, setup, inc


def main(out: str) -> None:
    import jax

    from maskdp_jax.audit import shadows

    if jax.local_device_count() != 2:
        raise SystemExit("run with XLA_FLAGS=--xla_force_host_platform_device_count=2")
    data, common, setup, inc = tiny()
    arrays = {}
    for way, kwargs in WAYS.items():
        if way == "mesh":
            assert shadows.device_mesh("loop") is None
            kwargs = {**kwargs, "mesh": shadows.device_mesh("vmap")}
            assert kwargs["mesh"].size == 2
        trained = shadows.train(setup, inc, data, chunk=CHUNK, **kwargs, **common)
        arrays.update({f"{way}_{i}": np.asarray(x) for i, x in enumerate(jax.tree.leaves(trained))})
    np.savez(out, **arrays)


if __name__ == "__main__":
    main(sys.argv[1])
