"""Theorem 4.1 closed form vs dp-accounting, and vs direct numerical integration."""

import doctest
import math

import dp_accounting
import numpy as np
import pytest
from scipy import integrate, stats

from maskdp_jax import accounting
from maskdp_jax.accounting import accountant, ledger, theorem41

ORDERS = list(range(2, 65)) + [128, 256]
GRID = [
    (q, sigma, steps)
    for q in (0.005, 0.02, 0.1, 0.5)
    for sigma in (0.6, 1.0, 2.0, 4.0)
    for steps in (1, 1000)
]


def _dp_accounting_rdp(q, sigma, steps, relation):
    acc = dp_accounting.rdp.RdpAccountant(orders=ORDERS, neighboring_relation=relation)
    acc.compose(
        dp_accounting.SelfComposedDpEvent(
            dp_accounting.PoissonSampledDpEvent(q, dp_accounting.GaussianDpEvent(sigma)), steps
        )
    )
    return acc


@pytest.mark.parametrize("q,sigma,steps", GRID)
def test_rdp_equals_dp_accounting_at_integer_orders(q, sigma, steps):
    ours = theorem41.theorem41_rdp(q=q, noise_multiplier=sigma, steps=steps, orders=ORDERS)
    for relation in (
        dp_accounting.NeighboringRelation.REPLACE_SPECIAL,
        dp_accounting.NeighboringRelation.ADD_OR_REMOVE_ONE,
    ):
        theirs = _dp_accounting_rdp(q, sigma, steps, relation).rdp
        np.testing.assert_allclose(ours, theirs, rtol=1e-9, atol=0)


@pytest.mark.parametrize("q,sigma,steps", GRID)
@pytest.mark.parametrize("delta", [1e-5, 1e-6])
def test_epsilon_equals_dp_accounting(q, sigma, steps, delta):
    ours = theorem41.theorem41_epsilon(
        q=q, noise_multiplier=sigma, steps=steps, delta=delta, orders=ORDERS
    )
    acc = _dp_accounting_rdp(q, sigma, steps, dp_accounting.NeighboringRelation.REPLACE_SPECIAL)
    assert ours == pytest.approx(acc.get_epsilon(delta), rel=1e-9, abs=1e-12)


@pytest.mark.parametrize("q,sigma", [(0.1, 1.0), (0.3, 0.8), (0.02, 2.0)])
@pytest.mark.parametrize("alpha", [2, 3, 6])
def test_log_moment_matches_numerical_integral(q, sigma, alpha):
    """A_α = E_{x~N(0,σ²)}[((1-q) + q·N(x;1,σ²)/N(x;0,σ²))^α], integrated directly."""

    def integrand(x):
        ratio = math.exp((2.0 * x - 1.0) / (2.0 * sigma**2))
        return stats.norm.pdf(x, scale=sigma) * ((1.0 - q) + q * ratio) ** alpha

    a_alpha, _ = integrate.quad(
        integrand, -40 * sigma, 40 * sigma, epsabs=0, epsrel=1e-12, limit=200
    )
    rdp = theorem41.theorem41_rdp(q=q, noise_multiplier=sigma, steps=1, orders=[alpha])
    assert rdp[0] == pytest.approx(math.log(a_alpha) / (alpha - 1), rel=1e-8)


def test_stable_for_tiny_and_huge_log_moments():
    # Large σ, small q: A_α - 1 ≈ binom(α, 2) q² (e^{1/σ²} - 1) to first order.
    q, sigma = 1e-4, 1e3
    rdp = theorem41.theorem41_rdp(q=q, noise_multiplier=sigma, steps=1, orders=[2, 10])
    for alpha, value in zip([2, 10], rdp, strict=True):
        approx = math.comb(alpha, 2) * q**2 * math.expm1(1 / sigma**2) / (alpha - 1)
        assert value == pytest.approx(approx, rel=1e-6)
    # Small σ, huge order: no overflow.
    rdp = theorem41.theorem41_rdp(q=0.5, noise_multiplier=0.2, steps=10, orders=[1024])
    assert np.isfinite(rdp).all() and rdp[0] > 0


def test_paper_ntu_setting():
    eps = accounting.theorem41_epsilon(q=128 / 40320, noise_multiplier=3.0, steps=47250, delta=1e-6)
    assert eps == pytest.approx(1.0817, abs=1e-3)


@pytest.mark.parametrize(
    "kwargs,err",
    [
        (dict(orders=[1.5, 2]), ValueError),
        (dict(orders=[1, 2]), ValueError),
        (dict(orders=[]), ValueError),
        (dict(noise_multiplier=0.0), ValueError),
        (dict(q=1.0), ValueError),
        (dict(delta=0.0), ValueError),
        (dict(steps=2.5), TypeError),
    ],
)
def test_bad_inputs(kwargs, err):
    args = dict(q=0.01, noise_multiplier=1.0, steps=10, delta=1e-5, orders=[2, 3])
    args.update(kwargs)
    with pytest.raises(err):
        theorem41.theorem41_epsilon(**args)


@pytest.mark.parametrize("module", [theorem41, accountant, ledger])
def test_docstring_examples(module):
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0
