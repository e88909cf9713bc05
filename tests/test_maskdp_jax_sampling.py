"""Poisson sampler and physical batching."""

import numpy as np
import pytest
from scipy import stats

from maskdp_jax.core.sampling import PoissonSampler, physical_batches


def test_batch_size_mean_and_variance():
    n, b = 2000, 100
    sampler = PoissonSampler(num_examples=n, expected_batch_size=b, seed=0)
    sizes = np.array([len(sampler.draw(s, stream=1)) for s in range(2000)])
    q = b / n
    # 2000 draws: the standard error of the mean is sqrt(q n (1-q) / 2000) ~ 0.22.
    assert abs(sizes.mean() - q * n) < 1.0
    assert abs(sizes.var() / (q * n * (1 - q)) - 1) < 0.1


def test_draws_are_reproducible_and_streams_differ():
    s = PoissonSampler(num_examples=500, expected_batch_size=50, seed=7)
    np.testing.assert_array_equal(s.draw(3, stream=0), s.draw(3, stream=0))
    assert not np.array_equal(np.sort(s.draw(3, stream=0)), np.sort(s.draw(3, stream=1)))


def test_physical_batches_lose_and_duplicate_nothing_and_never_truncate():
    rng = np.random.default_rng(0)
    indices = rng.permutation(1000)[:237]  # bigger than the physical batch size
    chunks = list(physical_batches(indices, physical_batch_size=64))
    assert len(chunks) == 4
    real = np.concatenate([idx[w > 0] for idx, w in chunks])
    np.testing.assert_array_equal(real, indices)
    assert all(len(idx) == 64 and len(w) == 64 for idx, w in chunks)
    assert sum(w.sum() for _, w in chunks) == 237
    assert list(physical_batches(np.array([], np.int64), physical_batch_size=8)) == []


def test_decoupled_public_and_private_draws_are_independent():
    """Chi-square test of independence of 'i in public' and 'i in private' over many steps."""
    n, b, steps = 200, 40, 400
    s = PoissonSampler(num_examples=n, expected_batch_size=b, seed=1)
    table = np.zeros((2, 2))
    overlaps = []
    for step in range(steps):
        lb = s.logical_batch(step, mode="maskdp", sampling="decoupled")
        pub = np.zeros(n, bool)
        pub[lb.public] = True
        pri = np.zeros(n, bool)
        pri[lb.private] = True
        for a in (0, 1):
            for c in (0, 1):
                table[a, c] += np.sum((pub == a) & (pri == c))
        overlaps.append(np.sum(pub & pri))
    _, p_value, _, _ = stats.chi2_contingency(table)
    assert p_value > 1e-3
    # Under independence the overlap is Binomial(n, q^2): mean 8 here; coupled would give 40.
    assert abs(np.mean(overlaps) - n * (b / n) ** 2) < 1.0


def test_coupled_uses_one_draw_and_modes_use_their_stream():
    s = PoissonSampler(num_examples=300, expected_batch_size=30, seed=2)
    lb = s.logical_batch(5, mode="maskdp", sampling="coupled")
    np.testing.assert_array_equal(lb.public, lb.private)
    dp = s.logical_batch(5, mode="dp")
    np.testing.assert_array_equal(dp.private, s.logical_batch(5, mode="maskdp").private)
    assert dp.public is None
    assert s.logical_batch(5, mode="nonprivate").private is None


@pytest.mark.parametrize("kwargs", [
    dict(num_examples=0, expected_batch_size=1, seed=0),
    dict(num_examples=10, expected_batch_size=11, seed=0),
    dict(num_examples=10, expected_batch_size=0, seed=0),
])
def test_bad_sampler_arguments(kwargs):
    with pytest.raises(ValueError):
        PoissonSampler(**kwargs)
