"""Banded correlated noise (maskdp_jax.bandmf) and the cyclic Poisson sampler it needs: one band is
DP-SGD, the noise has the strategy's covariance, each example takes part at most once per cycle,
and the accounting equals jax_privacy's amplified BandMF event. Small sizes: seconds."""

from __future__ import annotations

import dp_accounting
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from maskdp_jax import bandmf, noise, sampling
from maskdp_jax.accounting import accountant

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
    seg = bandmf.accounting_segment(q=q, noise_multiplier=sigma, steps=steps, bands=bands)
    ours = accountant.history_epsilon([seg], delta=delta, method="rdp", adjacency="special",
                                      sampling="decoupled")
    event = jp_accounting.amplified_bandmf_event(sigma, steps, num_bands=bands,
                                                 sampling_prob=bands * q)
    rdp = dp_accounting.rdp.RdpAccountant()
    rdp.compose(event)
    assert ours == pytest.approx(rdp.get_epsilon(delta), rel=1e-6)
