"""Shadow models trained with the training step (audit.shadows): balanced complementary halves,
batches drawn only from a model's own half, vmapped training equal to train.py's step one model
at a time bit for bit (and split over two devices, in a subprocess: tests/shadow_cases.py), and
scores."""

import os
import subprocess
import sys

import jax
import numpy as np
import pytest

from maskdp_jax.audit import lira, shadows
from maskdp_jax.core import parallel, partition
from maskdp_jax.core.plan import PrivacyPlan

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import shadow_cases  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
HANG = 1800  # against a hang only: the subprocess takes ~15 s on a quiet 2-core machine


def test_complementary_halves_are_balanced_both_ways():
    inc = shadows.complementary_inclusion(np.random.default_rng(0), 6, 10)
    assert np.all(inc.sum(axis=1) == 5) and np.all(inc.sum(axis=0) == 3)
    assert np.all(inc[0] == ~inc[1]) and not np.all(inc[0] == inc[2])
    with pytest.raises(ValueError, match="even number"):
        shadows.complementary_inclusion(np.random.default_rng(0), 5, 10)
    with pytest.raises(ValueError, match="even number"):
        shadows.complementary_inclusion(np.random.default_rng(0), 4, 9)


def test_a_mesh_needs_vmapped_chunks_and_one_device_needs_no_mesh():
    assert shadows.device_mesh("vmap") is None  # this process has one CPU device
    plan = PrivacyPlan(mode="nonprivate", num_examples=2, batch_size=1, steps=1,
                       l2_clip_norm=1.0, noise_multiplier=0.0, delta=1e-3)
    with pytest.raises(ValueError, match="batching='vmap' with a mesh"):
        shadows.train(shadows.ShadowSetup(plan=plan, physical_batch_size=1),
                      shadows.complementary_inclusion(np.random.default_rng(0), 4, 4), {},
                      trainable={}, frozen={}, apply_fn=None, tx=None, tokens=None,
                      batching="loop", mesh=parallel.make_mesh(jax.local_devices()))


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


@pytest.mark.parametrize("sampling", ["coupled", "decoupled"])
def test_shadow_models_draw_with_the_plans_sampling_scheme(sampling):
    # Coupled sampling reveals the private batch (the noise-free public gradient): the shadow
    # models of a coupled plan must be trained on that algorithm, not the decoupled one.
    plan = PrivacyPlan(mode="maskdp", num_examples=20, batch_size=8, steps=10, l2_clip_norm=1.0,
                       noise_multiplier=1.0, delta=1e-3, sampling=sampling)
    setup = shadows.ShadowSetup(plan=plan, physical_batch_size=4, seed=3)
    members = np.flatnonzero(shadows.complementary_inclusion(np.random.default_rng(1), 4, 40)[0])
    same = []
    for t in range(plan.steps):
        public, private = (np.concatenate([i[w > 0] for i, w in side] or [np.zeros(0, int)])
                           for side in shadows.logical_batches(setup, 0, members, t))
        same.append(np.array_equal(public, private))
    assert all(same) if sampling == "coupled" else not any(same)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """The study of ``shadow_cases.tiny`` trained three ways in a subprocess with two CPU
    devices; the leaves come back in the trainable tree. Compiled with the session's settings
    (tests/conftest.py); the three ways are also equal bit for bit at XLA's default
    optimisation."""
    out = tmp_path_factory.mktemp("shadows") / "trained.npz"
    env = {**os.environ, "JAX_PLATFORMS": "cpu",
           # the session's compile settings (tests/conftest.py) and two CPU devices
           "XLA_FLAGS": f"{os.environ.get('XLA_FLAGS', '')} "
                        "--xla_force_host_platform_device_count=2"}
    proc = subprocess.run([sys.executable, os.path.join(HERE, "shadow_cases.py"), str(out)],
                          env=env, capture_output=True, text=True, timeout=HANG)
    assert proc.returncode == 0, proc.stderr[-4000:]
    data, common, _, _ = shadow_cases.tiny()
    treedef = jax.tree.structure(common["trainable"])
    with np.load(out) as f:
        trained = {w: jax.tree.unflatten(treedef, [f[f"{w}_{i}"]
                                                   for i in range(treedef.num_leaves)])
                   for w in shadow_cases.WAYS}
    return data, common, trained, common["trainable"]


@pytest.mark.slow
def test_vmapped_shadows_equal_the_training_step_one_at_a_time_bit_for_bit(tiny):
    """Same plan, sampler, clipping, noise and optimiser: on the CPU the
    vmapped models (chunks of 3 out of 4: the last chunk padded) are train.py's step's models bit
    for bit, and they trained. Split over a 2-device mesh they agree to float rounding (the
    module docstring of audit.shadows says why not bit for bit)."""
    data, common, trained, init = tiny
    for v, mesh, loop in zip(*(jax.tree.leaves(trained[w]) for w in ("vmap", "mesh", "loop")),
                             strict=True):
        np.testing.assert_array_equal(v, loop)
        np.testing.assert_allclose(mesh, loop, rtol=1e-5, atol=1e-6)
    moved = [np.abs(np.asarray(loop) - np.asarray(start)[None]).max(axis=tuple(
        range(1, np.ndim(loop)))) for loop, start in zip(jax.tree.leaves(trained["loop"]),
                                                        jax.tree.leaves(init), strict=True)]
    assert np.max(moved, axis=0).min() > 1e-3  # every model moved from the start (adam 1e-2)
    leaf = jax.tree.leaves(trained["loop"])[0]
    assert not np.allclose(leaf[0], leaf[1])  # complementary halves, different noise


@pytest.mark.slow
def test_lockstep_counters_are_shared_by_the_chunk(tiny):
    """The step and optax's integer counters carry no model axis (the scalar bias correction of
    the one-model step); parameters, moments and each model's noise key do."""
    _, common, _, _ = tiny
    setup = shadows.ShadowSetup(plan=PrivacyPlan(
        mode="maskdp", num_examples=8, batch_size=2, steps=2, l2_clip_norm=1.0,
        noise_multiplier=1.0, delta=1e-3), physical_batch_size=4)
    state = shadows._initial_state(setup, 0, trainable=common["trainable"],
                                   frozen=common["frozen"], tx=common["tx"])
    axes = shadows._model_axes(state)
    assert axes.step is None and axes.frozen is None and axes.trainable == 0
    assert axes.privacy.key == 0
    leaves = jax.tree.leaves(axes.opt_state, is_leaf=lambda x: x is None)
    states = jax.tree.leaves(state.opt_state)
    assert [a is None for a in leaves] == [np.ndim(x) == 0 for x in states]
    assert leaves.count(None) == 1  # adam's count


@pytest.mark.slow
def test_scores_are_each_models_log_odds(tiny):
    data, common, trained, _ = tiny
    phi = shadows.scores(trained["loop"], common["frozen"], data, apply_fn=common["apply_fn"],
                         batch_size=8)
    assert phi.shape == (4, 16) and np.all(np.isfinite(phi))
    one = jax.tree.map(lambda x: x[2], trained["loop"])
    logits = common["apply_fn"](partition.merge(one, common["frozen"]), data["video"][:, 0])
    np.testing.assert_allclose(phi[2], lira.log_odds_confidence(logits, data["label"]),
                               rtol=1e-5, atol=1e-5)
