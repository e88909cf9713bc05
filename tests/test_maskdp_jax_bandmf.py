"""Banded correlated noise (maskdp_jax.core.bandmf) and the cyclic Poisson sampler it needs: one
band is DP-SGD, the noise has the strategy's covariance, each example takes part at most once per
cycle, and the accounting equals jax_privacy's amplified BandMF event. Small sizes: seconds."""

from __future__ import annotations

import dp_accounting
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from maskdp_jax.accounting import accountant, events
from maskdp_jax.core import bandmf, noise, sampling

pytest.importorskip("jax_privacy")


def test_one_band_is_the_independent_noise_bit_for_bit():
    tree = {"w": jnp.zeros((3, 4)), "b": jnp.zeros((5,))}
    mech = bandmf.BandedNoise(steps=4, bands=1)
    state = mech.init(tree)
    base = jax.random.key(7)
    for t in range(4):
        key = noise.step_key(base, t)
        got, state = mech.noise_like(tree, key, state, noise_multiplier=1.3, l2_clip_norm=0.5)
        want = noise.gaussian_noise_like(tree, key, noise_multiplier=1.3, l2_clip_norm=0.5)
        jax.tree.map(np.testing.assert_array_equal, got, want)


def test_the_noise_has_the_strategys_covariance_across_steps():
    """Over many keys, the noise of steps 0..T-1 (one coordinate) has covariance
    σ²C² (𝐂ᵀ𝐂)⁻¹: the streaming inverse is 𝐂⁻¹ applied to the independent draws."""
    steps, bands, samples = 6, 3, 4000
    mech = bandmf.BandedNoise(steps=steps, bands=bands)
    tree = jnp.zeros((samples,))  # one coordinate per sample: the samples are the leaf's entries

    def run(key):
        state, out = mech.init(tree), []
        for t in range(steps):
            y, state = mech.noise_like(tree, noise.step_key(key, t), state,
                                       noise_multiplier=1.0, l2_clip_norm=1.0)
            out.append(y)
        return jnp.stack(out)  # [steps, samples]

    draws = np.asarray(jax.jit(run)(jax.random.key(0)), np.float64)
    empirical = draws @ draws.T / samples
    c = np.asarray(bandmf.strategy(steps, bands).materialize(), np.float64)
    inverse = np.linalg.inv(c)
    expected = inverse @ inverse.T
    assert not np.allclose(expected, np.diag(np.diag(expected)), atol=0.05)  # correlated
    np.testing.assert_allclose(empirical, expected, atol=0.08)


def test_the_strategy_has_unit_columns_and_its_bands():
    c = np.asarray(bandmf.strategy(8, 3).materialize())
    np.testing.assert_allclose(np.linalg.norm(c, axis=0), 1.0, rtol=1e-5)
    assert np.allclose(np.triu(c, 1), 0) and np.allclose(np.tril(c, -3), 0)
    assert bandmf.strategy_coefficients(8, 1) == (1.0,)
    with pytest.raises(ValueError, match="bands must be an integer in"):
        bandmf.BandedNoise(steps=4, bands=5)


def test_cyclic_sampling_takes_each_example_once_per_cycle_at_rate_b_q():
    n, b, bands = 3000, 30, 4
    cyclic = sampling.PoissonSampler(num_examples=n, expected_batch_size=b, seed=1,
                                     private_seed=2, cycle_length=bands)
    plain = sampling.PoissonSampler(num_examples=n, expected_batch_size=b, seed=1,
                                    private_seed=2)
    groups = cyclic.groups()
    sizes = []
    for t in range(40):
        drawn = cyclic.draw(t, stream=sampling.PRIVATE_STREAM)
        assert np.all(groups[drawn] == t % bands)
        sizes.append(len(drawn))
        # The public stream is not cyclic.
        np.testing.assert_array_equal(cyclic.draw(t, stream=sampling.PUBLIC_STREAM),
                                      plain.draw(t, stream=sampling.PUBLIC_STREAM))
    assert abs(np.mean(sizes) - b) < 3  # expected batch B: b q of a group of N / b
    one = sampling.PoissonSampler(num_examples=n, expected_batch_size=b, seed=1, private_seed=2,
                                  cycle_length=1)
    np.testing.assert_array_equal(one.draw(3, stream=sampling.PRIVATE_STREAM),
                                  plain.draw(3, stream=sampling.PRIVATE_STREAM))


@pytest.mark.parametrize("steps,bands", [(100, 4), (99, 8), (64, 1)])
def test_the_ledger_segment_is_jax_privacys_amplified_bandmf_event(steps, bands):
    from jax_privacy.experimental import accounting as jp_accounting

    q, sigma, delta = 0.01, 1.1, 1e-5
    seg = events.banded_segment(q=q, noise_multiplier=sigma, steps=steps, bands=bands)
    ours = accountant.history_epsilon([seg], delta=delta, method="rdp", adjacency="special",
                                      sampling="decoupled")
    event = jp_accounting.amplified_bandmf_event(sigma, steps, num_bands=bands,
                                                 sampling_prob=bands * q)
    rdp = dp_accounting.rdp.RdpAccountant()
    rdp.compose(event)
    assert ours == pytest.approx(rdp.get_epsilon(delta), rel=1e-6)


# ---------------------------------------------------------------------------------------------
# Wired into the plan, the train step and the mechanism.
def _banded_plan(mode="maskdp", bands=2, steps=4, sigma=1.3, b=4):
    from maskdp_jax.core.plan import PrivacyPlan

    return PrivacyPlan(mode=mode, num_examples=1000, batch_size=b, steps=steps, l2_clip_norm=0.5,
                       noise_multiplier=sigma, delta=1e-5, noise="banded", bands=bands)


def _steps(tiny_model, plan, batches, *, microbatch_size=None):
    """The train step's states over ``batches`` (LogicalBatchData per step) from one base key."""
    import optax
    from conftest import PATCH_STRIDE

    from maskdp_jax.core.mechanism import Mechanism
    from maskdp_jax.core.randomness import Randomness
    from maskdp_jax.core.tokenizer import Tokenizer
    from maskdp_jax.core.train_step import PixelViews, TrainState, make_train_step

    _, params, apply_fn = tiny_model
    tx = optax.sgd(0.1)
    mechanism = Mechanism(plan=plan, randomness=Randomness(mode="seeded", seed=3))
    step = make_train_step(apply_fn=apply_fn, tx=tx, mechanism=mechanism,
                           views=PixelViews(Tokenizer(patch_stride=PATCH_STRIDE)),
                           microbatch_size=microbatch_size)
    state = TrainState.create(trainable=params, frozen={}, tx=tx, mechanism=mechanism)
    states = []
    for batch in batches:
        state, _ = step(state, batch)
        states.append(jax.tree.map(jnp.copy, state))  # the next step consumes `state`
    return states


def _batches(mode, n=3, size=4):
    from conftest import random_batch

    from maskdp_jax.core.train_step import LogicalBatchData

    rng = np.random.default_rng(11)
    out = []
    for _ in range(n):
        private = random_batch(rng, size=size, clips=1)
        private["mask"][:] = 0
        public = random_batch(rng, size=size, clips=1)
        public["mask"][:] = 0
        out.append(LogicalBatchData(public=[public] if mode == "maskdp" else [],
                                    private=[private]))
    return out


def test_one_banded_band_trains_exactly_as_independent_noise(tiny_model):
    from maskdp_jax.core.plan import PrivacyPlan

    banded = _banded_plan(mode="dp", bands=1)
    independent = PrivacyPlan(**{**banded.__dict__, "noise": "independent"})
    a = _steps(tiny_model, banded, _batches("dp"))[-1]
    b = _steps(tiny_model, independent, _batches("dp"))[-1]
    jax.tree.map(np.testing.assert_array_equal, a.trainable, b.trainable)


def test_dp_with_banded_noise_equals_maskdp_with_all_private_masks(tiny_model):
    dp = _steps(tiny_model, _banded_plan("dp"), _batches("dp"))[-1]
    mask = _steps(tiny_model, _banded_plan("maskdp"), _batches("maskdp"))[-1]
    jax.tree.map(np.testing.assert_array_equal, dp.trainable, mask.trainable)
    jax.tree.map(np.testing.assert_array_equal, dp.privacy.noise, mask.privacy.noise)


def test_banded_noise_is_added_once_per_step_with_microbatching(tiny_model):
    """Micro-batching splits the clipped sum, never the noise: the same states either way, and
    the noise state advances once per logical step."""
    whole = _steps(tiny_model, _banded_plan("dp"), _batches("dp"))
    micro = _steps(tiny_model, _banded_plan("dp"), _batches("dp"), microbatch_size=2)
    for a, b in zip(whole, micro, strict=True):
        jax.tree.map(lambda x, y: np.testing.assert_allclose(x, y, rtol=2e-5, atol=1e-6),
                     a.trainable, b.trainable)
    assert [int(s.privacy.noise.index) for s in whole] == [1, 2, 3]


def test_the_banded_noise_is_correlated_across_train_steps(tiny_model):
    """The update of step 1 carries -(c1/c0) times step 0's noise: with no learning signal
    (padding only) consecutive updates are negatively correlated as the strategy says, while
    independent noise would give ~0."""
    from conftest import random_batch

    from maskdp_jax.core.train_step import LogicalBatchData

    padding = random_batch(np.random.default_rng(6), size=2)
    padding["weight"][:] = 0.0
    batches = [LogicalBatchData(public=[], private=[padding])] * 2
    plan = _banded_plan("dp", bands=2, steps=2)
    _, params, _ = tiny_model
    states = _steps(tiny_model, plan, batches)
    flat = [np.concatenate([np.ravel(v) for v in jax.tree.leaves(s.trainable)]) for s in states]
    start = np.concatenate([np.ravel(v) for v in jax.tree.leaves(params)])
    u0, u1 = flat[0] - start, flat[1] - flat[0]
    inverse = np.linalg.inv(np.asarray(bandmf.strategy(2, 2).materialize(), np.float64))
    expected = (inverse @ inverse.T)[0, 1] / np.sqrt((inverse @ inverse.T)[0, 0]
                                                      * (inverse @ inverse.T)[1, 1])
    assert expected < -0.2
    assert abs(np.corrcoef(u0, u1)[0, 1] - expected) < 0.15


def test_banded_plans_refuse_what_the_mechanism_does_not_cover():
    from maskdp_jax.core.plan import PrivacyPlan

    with pytest.raises(ValueError, match="needs the decoupled scheme"):
        PrivacyPlan.calibrate(mode="maskdp", num_examples=1000, batch_size=10, steps=20,
                              l2_clip_norm=1.0, delta=1e-5, noise_multiplier=1.0,
                              sampling="coupled", noise="banded", bands=2)
    with pytest.raises(ValueError, match="must be below N"):
        _banded_plan(bands=4, b=250)  # b × B = N: the groups' rate would be 1
    with pytest.raises(ValueError, match="needs noise = 'banded'"):
        PrivacyPlan(mode="dp", num_examples=1000, batch_size=10, steps=20, l2_clip_norm=1.0,
                    noise_multiplier=1.0, delta=1e-5, bands=2)
    with pytest.raises(ValueError, match="mode 'nonprivate' has no private pass"):
        PrivacyPlan(mode="nonprivate", num_examples=1000, batch_size=10, steps=20,
                    l2_clip_norm=1.0, noise_multiplier=0.0, delta=1e-5, noise="banded", bands=2)


def test_calibration_targets_the_amplified_bandmf_epsilon():
    from maskdp_jax import accounting
    from maskdp_jax.core.plan import PrivacyPlan

    plan = PrivacyPlan.calibrate(mode="maskdp", num_examples=1000, batch_size=10, steps=40,
                                 l2_clip_norm=1.0, delta=1e-5, target_epsilon=2.0,
                                 noise="banded", bands=4)
    ledger = accounting.Ledger()
    plan.record_step(ledger, steps=40)
    assert 1.9 < plan.epsilon(ledger) <= 2.0 + 1e-6
    # Charged by rounds: the first 4 steps are one round, the 5th starts the second.
    four, five = accounting.Ledger(), accounting.Ledger()
    plan.record_step(four, steps=4)
    plan.record_step(five, steps=5)
    one = accounting.Ledger()
    plan.record_step(one)
    assert plan.epsilon(one) == plan.epsilon(four) < plan.epsilon(five)


def test_the_mechanism_carries_banded_noise_through_jit():
    import maskdp_jax as mdp

    plan = _banded_plan("dp", bands=2, steps=3, b=10)
    mech = mdp.Mechanism(plan=plan, randomness=mdp.Randomness(mode="seeded", seed=0))
    params = jnp.zeros((5,))
    with pytest.raises(ValueError, match=r"mech.init\(params\)"):
        mech.init()
    state = mech.init(params)
    step = jax.jit(lambda s, ex: mech.gradient(lambda w, x, y: jnp.sum(w * x), params, s,
                                               private=ex))
    grads = []
    for _ in range(plan.steps):
        drawn = mech.batch(state)
        assert np.all(mech.sampler.groups()[drawn.private] == int(state.step) % 2)
        idx, w = mdp.padded_indices(drawn.private, multiple_of=16)
        ex = mdp.Examples(inputs=np.zeros((len(idx), 5), np.float32),
                          targets=np.zeros(len(idx), np.float32), weights=w)
        grad, state, _ = step(state, ex)
        grads.append(np.asarray(grad))
    # Zero inputs: the gradients are the banded noise / B, step by step.
    banded = bandmf.for_plan(plan)
    noise_state = banded.init(params)
    for t, grad in enumerate(grads):
        want, noise_state = banded.noise_like(params, noise.step_key(state.key, t), noise_state,
                                              noise_multiplier=plan.noise_multiplier,
                                              l2_clip_norm=plan.l2_clip_norm)
        np.testing.assert_allclose(grad, np.asarray(want) / plan.batch_size, rtol=1e-5)
    with pytest.raises(ValueError, match="cannot be re-planned"):
        mech.replan(state, plan=plan)


def test_the_low_level_pieces_refuse_what_would_break_min_separation():
    import maskdp_jax as mdp

    cyclic = sampling.PoissonSampler(num_examples=100, expected_batch_size=10, seed=0,
                                     cycle_length=2)
    with pytest.raises(ValueError, match="coupled sampling .* not cyclic"):
        cyclic.logical_batch(0, mode="maskdp", sampling="coupled")
    with pytest.raises(ValueError, match="cannot follow a history"):
        mdp.Mechanism(plan=_banded_plan(), randomness=mdp.Randomness(mode="seeded", seed=0),
                      history=(events.make_segment(q=0.01, noise_multiplier=1.0,
                                                          steps=3),))


def test_the_accounting_cli_converts_for_bands(capsys):
    from maskdp_jax.accounting import __main__ as cli
    from maskdp_jax.core.plan import PrivacyPlan

    plan = PrivacyPlan.calibrate(mode="dp", num_examples=1024, batch_size=64, steps=256,
                                 l2_clip_norm=1.0, delta=1e-5, target_epsilon=1.0,
                                 noise="banded", bands=4)
    assert cli.cli(["accounting", "epsilon", "--q", "0.0625", "--steps", "256", "--delta", "1e-5",
                     "--sigma", repr(plan.noise_multiplier), "--bands", "4",
                     "--method", "pld"]) == 0
    out = capsys.readouterr().out
    assert "q=0.25 steps=64 (banded, 4 bands" in out
    assert abs(float(out.split("epsilon[pld] = ")[1].split()[0]) - 1.0) < 1e-3


def test_a_banded_plan_without_jax_privacy_says_what_to_install(monkeypatch):
    """The strategy's library missing is found when the plan is made, before any data is read,
    with the command that installs it."""
    import sys

    monkeypatch.setitem(sys.modules, "jax_privacy.matrix_factorization", None)
    with pytest.raises(ImportError, match=r"pip install -e '\.\[audit\]'"):
        _banded_plan()
