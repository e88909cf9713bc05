"""Shadow models trained with the training step (audit.shadows): balanced complementary halves,
batches drawn only from a model's own half, vmapped training equal to train.py's step one model
at a time (to float rounding), and scores."""

import jax
import numpy as np
import optax
import pytest

import models
from audit import lira, shadows
from data import synthetic
from maskdp_jax import partition
from maskdp_jax.plan import PrivacyPlan
from maskdp_jax.tokenizer import Tokenizer


def test_complementary_halves_are_balanced_both_ways():
    inc = shadows.complementary_inclusion(np.random.default_rng(0), 6, 10)
    assert np.all(inc.sum(axis=1) == 5) and np.all(inc.sum(axis=0) == 3)
    assert np.all(inc[0] == ~inc[1]) and not np.all(inc[0] == inc[2])
    with pytest.raises(ValueError, match="even number"):
        shadows.complementary_inclusion(np.random.default_rng(0), 5, 10)
    with pytest.raises(ValueError, match="even number"):
        shadows.complementary_inclusion(np.random.default_rng(0), 4, 9)


@pytest.mark.parametrize("mode", ["maskdp", "dp", "nonprivate"])
def test_a_model_samples_only_its_own_half(mode):
    plan = PrivacyPlan(mode=mode, num_examples=20, batch_size=8, steps=30, l2_clip_norm=1.0,
                       noise_multiplier=1.0 if mode != "nonprivate" else 0.0, delta=1e-3)
    setup = shadows.ShadowSetup(plan=plan, physical_batch_size=4, seed=3)
    inc = shadows.complementary_inclusion(np.random.default_rng(1), 4, 40)
    for m in range(4):
        members = np.flatnonzero(inc[m])
        seen = []
        for t in range(plan.steps):
            for side in shadows.logical_batches(setup, m, members, t):
                seen += [i[w > 0] for i, w in side]
        seen = np.concatenate(seen)
        assert set(seen.tolist()) <= set(members.tolist())
        assert len(seen) == pytest.approx(plan.steps * 8 * (1 + (mode == "maskdp")), rel=0.25)


@pytest.fixture(scope="module")
def tiny():
    train, _ = synthetic.make_splits(num_train=16, num_test=8, frames=8, clip_frames=8, size=32)
    data = train.get_batch(np.arange(16))
    model = models.get_model("mvit_test", num_classes=train.num_classes)
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
    trained = {b: shadows.train(setup, inc, data, batching=b, chunk=4, **common)
               for b in shadows.BATCHINGS}
    return data, common, trained, trainable


def test_vmapped_shadows_equal_the_training_step_one_at_a_time(tiny):
    """Same plan, sampler, clipping, noise and optimiser: the vmapped models are train.py's
    step's models up to XLA:CPU's reduction order (module docstring), and they trained."""
    data, common, trained, init = tiny
    for v, loop in zip(jax.tree.leaves(trained["vmap"]), jax.tree.leaves(trained["loop"]),
                       strict=True):
        np.testing.assert_allclose(v, loop, rtol=1e-4, atol=1e-6)
    moved = [np.abs(np.asarray(loop) - np.asarray(start)[None]).max(axis=tuple(
        range(1, np.ndim(loop)))) for loop, start in zip(jax.tree.leaves(trained["loop"]),
                                                        jax.tree.leaves(init), strict=True)]
    assert np.max(moved, axis=0).min() > 1e-3  # every model moved from the start (adam 1e-2)
    leaf = jax.tree.leaves(trained["loop"])[0]
    assert not np.allclose(leaf[0], leaf[1])  # complementary halves, different noise


def test_scores_are_each_models_log_odds(tiny):
    data, common, trained, _ = tiny
    phi = shadows.scores(trained["loop"], common["frozen"], data, apply_fn=common["apply_fn"],
                         batch_size=8)
    assert phi.shape == (4, 16) and np.all(np.isfinite(phi))
    one = jax.tree.map(lambda x: x[2], trained["loop"])
    logits = common["apply_fn"](partition.merge(one, common["frozen"]), data["video"][:, 0])
    np.testing.assert_allclose(phi[2], lira.log_odds_confidence(logits, data["label"]),
                               rtol=1e-5, atol=1e-5)
