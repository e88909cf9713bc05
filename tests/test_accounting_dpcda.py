"""DP-CDA's accountant (accounting/dpcda.py, accounting/without_replacement.py), checked
independently: the Wang et al. 2019 bound re-evaluated here from the paper's formula (naive
nested sums in 300-digit arithmetic), the Pearson-Vajda moments by numerical integration, the
per-draw Gaussian part against dp-accounting, and the bound against a true Rényi divergence of
a tiny subsampled mechanism, which any upper bound must exceed."""

import math

import dp_accounting
import mpmath
import numpy as np
import pytest
from scipy import integrate, stats

from maskdp_jax.accounting import dpcda, without_replacement
from maskdp_jax.accounting.theorem41 import balle2020_curve

PUBLIC = dict(num_classes=10, min_class_size=139, num_records=1437, num_synthetic=1437,
              delta=1e-5)  # the digits split


def _setup(**change):
    return dpcda.MixingSetup(**(dict(order=4, clip_norm=4.0) | PUBLIC | change))


def _wang_from_the_paper(gamma, z, alpha):
    """Wang, Balle, Kasiviswanathan 2019, Thm 27 (min with Thm 9) for ε(j) = j/(2z²), written
    from the formula with naive sums at 300 digits (no shared code with the implementation)."""
    with mpmath.workdps(300):
        g, eps = mpmath.mpf(gamma), (lambda j: mpmath.mpf(j) / (2 * mpmath.mpf(z) ** 2))

        def b(m):
            return sum((-1) ** i * mpmath.binomial(m, i) * mpmath.exp((i - 1) * eps(i))
                       for i in range(m + 1))

        total = 1 + g**2 * mpmath.binomial(alpha, 2) * min(4 * (mpmath.exp(eps(2)) - 1),
                                                          2 * mpmath.exp(eps(2)))
        for j in range(3, alpha + 1):
            improved = 4 * mpmath.sqrt(b(2 * (j // 2)) * b(2 * math.ceil(j / 2)))
            general = 2 * mpmath.exp((j - 1) * eps(j))
            total += g**j * mpmath.binomial(alpha, j) * min(improved, general)
        return float(min(mpmath.log(total) / (alpha - 1), eps(alpha)))


@pytest.mark.parametrize("gamma,z", [(0.03, 0.7), (0.03, 3.0), (0.2, 1.5), (0.5, 10.0),
                                     (0.001, 30.0)])
def test_wang_bound_equals_the_formula_evaluated_independently(gamma, z):
    orders = [2, 3, 4, 7, 16, 33, 64]
    ours = without_replacement.subsampled_gaussian_rdp(sampling_rate=gamma, noise_multiplier=z,
                                                       orders=orders)
    theirs = [_wang_from_the_paper(gamma, z, a) for a in orders]
    np.testing.assert_allclose(ours, theirs, rtol=1e-9)


@pytest.mark.parametrize("m,rho", [(2, 0.3), (4, 0.05), (6, 0.5), (10, 0.02), (8, 1.0)])
def test_pearson_vajda_moment_is_the_integral(m, rho):
    """B(m) = E_q[(p/q - 1)^m] for the pair N(μ, 1), N(0, 1), μ = √(2ρ)."""
    mu = math.sqrt(2 * rho)
    value, _ = integrate.quad(lambda x: stats.norm.pdf(x) * (math.exp(mu * x - mu * mu / 2) - 1)
                              ** m, -40, 40, limit=400, epsabs=0, epsrel=1e-11)
    assert math.exp(without_replacement.log_pearson_vajda_moment(m, rho)) == pytest.approx(
        value, rel=1e-7)


def test_pearson_vajda_moment_survives_cancellation_and_refuses_odd_orders():
    """float64's alternating sum is noise here (terms ~1e38, result ~1e-50): the moment must
    equal the integral, evaluated in 40-digit quadrature on a fine grid."""
    m, rho = 128, 1e-3
    with mpmath.workdps(40):
        mu = mpmath.sqrt(2 * mpmath.mpf(rho))
        integral = mpmath.quad(lambda x: mpmath.npdf(x) * (mpmath.exp(mu * x - mu * mu / 2) - 1)
                               ** m, mpmath.linspace(-40, 60, 101))
        expected = float(mpmath.log(integral))
    assert without_replacement.log_pearson_vajda_moment(m, rho) == pytest.approx(expected,
                                                                                 rel=1e-10)
    with pytest.raises(ValueError, match="even"):
        without_replacement.log_pearson_vajda_moment(3, 0.1)  # the seed's B(⌈j/2⌉) form


def test_bound_upper_bounds_a_true_subsampled_divergence():
    """n = 2 records, m = 1 drawn (γ = 1/2), Gaussian noise std 1/z on a scalar in [0, 1]
    replaced by another (sensitivity 1): D = {0, x2}, D' = {1, x2}; the true D_α by quadrature
    is a lower bound on the mechanism's RDP, so the bound must exceed it; it must also be below
    the un-amplified curve."""
    z = sd = 0.8  # noise std over the sensitivity 1
    for x2 in (0.0, 0.5, 1.0):
        for alpha in (2, 3, 5, 8):
            def integrand(x, x2=x2, alpha=alpha):
                p = 0.5 * stats.norm.pdf(x, 0, sd) + 0.5 * stats.norm.pdf(x, x2, sd)
                q = 0.5 * stats.norm.pdf(x, 1, sd) + 0.5 * stats.norm.pdf(x, x2, sd)
                return p**alpha * q ** (1 - alpha)

            moment, _ = integrate.quad(integrand, -10, 11, limit=200)
            true = math.log(moment) / (alpha - 1)
            bound = without_replacement.subsampled_gaussian_rdp(
                sampling_rate=0.5, noise_multiplier=z, orders=[alpha])[0]
            assert true <= bound <= alpha / (2 * z * z) + 1e-12


def test_one_draw_is_the_gaussian_mechanism_dp_accounting_knows():
    """The un-amplified part: ε(α) = (α/l²)(2c²/σx² + 1/σy²) (Saha et al. 2024) = α/(2z²) = the RDP
    of dp-accounting's GaussianDpEvent(z)."""
    order, c, sx, sy = 4, 2.0, 1.3, 0.7
    z = dpcda.noise_multiplier(order=order, clip_norm=c, sigma_x=sx, sigma_y=sy)
    orders = [2.0, 3.0, 8.0, 32.0]
    acc = dp_accounting.rdp.RdpAccountant(orders=orders).compose(
        dp_accounting.GaussianDpEvent(z))
    seed_formula = [a / order**2 * (2 * c**2 / sx**2 + 1 / sy**2) for a in orders]
    np.testing.assert_allclose(acc._rdp, seed_formula, rtol=1e-12)
    assert dpcda.noise_multiplier(order=order, clip_norm=c, sigma_x=sx, sigma_y=None) == \
        pytest.approx(order * sx / (2 * c))


def test_mixing_epsilon_cases_rates_and_draws():
    setup = _setup()
    p = dpcda.mixing_epsilon(setup, sigma_x=4.5, sigma_y=4.5)
    assert p.sampling_rate == 4 / 139  # l / (the public class-size bound), not l/N
    assert p.draws_same_label == p.draws_label_change == 1430  # ⌊T/K⌋·K draws
    assert p.epsilon == max(p.epsilon_same_label, p.epsilon_label_change)
    assert p.epsilon_rate_dataset < p.epsilon / 5  # the careless reading under-counts ~K-fold
    affected = dpcda.mixing_epsilon(_setup(draws="affected"), sigma_x=4.5, sigma_y=4.5)
    assert (affected.draws_same_label, affected.draws_label_change) == (143, 286)
    assert affected.epsilon < p.epsilon
    # the label term only ever adds: dropping it lowers ε at the same σx.
    assert dpcda.mixing_epsilon(setup, sigma_x=4.5, sigma_y=None).epsilon < p.epsilon
    assert math.isinf(dpcda.mixing_epsilon(setup, sigma_x=4.5, sigma_y=0.0).epsilon)
    # label change = dp-accounting's Poisson-subsampled Gaussian at the same rate and z.
    acc = dp_accounting.rdp.RdpAccountant(orders=[float(a) for a in dpcda.DEFAULT_ORDERS])
    acc.compose(dp_accounting.PoissonSampledDpEvent(
        4 / 139, dp_accounting.GaussianDpEvent(p.noise_multiplier)), 1430)
    assert p.epsilon_label_change == pytest.approx(acc.get_epsilon(1e-5), rel=1e-12)


@pytest.mark.parametrize("target,ratio", [(1.0, 1.0), (5.0, None), (10.0, 0.5)])
def test_calibration_hits_the_target_from_below(target, ratio):
    setup = _setup(order=8, clip_norm=1.0)
    p = dpcda.calibrate_sigma_x(setup, target_epsilon=target, sigma_ratio=ratio)
    assert target * (1 - 1e-4) <= p.epsilon <= target
    assert p.sigma_y == (None if ratio is None else pytest.approx(ratio * p.sigma_x))
    less = dpcda.mixing_epsilon(setup, sigma_x=p.sigma_x * 0.999,
                                sigma_y=None if ratio is None else ratio * p.sigma_x * 0.999)
    assert less.epsilon > target


@pytest.mark.parametrize("change,match", [
    (dict(order=139), "smaller than the smallest class"),
    (dict(order=0), "order must be an integer"),
    (dict(clip_norm=0.0), "clip norm"),
    (dict(clip_norm=-1.0), "clip norm"),
    (dict(num_classes=1), "num_classes"),
    (dict(min_class_size=150), "need 1500 records"),
    (dict(delta=1 / 1000), "1/N"),
    (dict(num_synthetic=5), "no sample per class"),
    (dict(draws="some"), "draws must be one of"),
])
def test_bad_inputs_are_refused(change, match):
    with pytest.raises(ValueError, match=match):
        _setup(**change)


def test_the_private_class_sizes_are_checked_against_the_public_bound():
    dpcda.check_class_sizes(class_sizes=[139, 146, 150], min_class_size=139)
    with pytest.raises(ValueError, match="no records"):
        dpcda.check_class_sizes(class_sizes=[50, 0, 40], min_class_size=10)
    with pytest.raises(ValueError, match=r"classes \[1\] have fewer than min_class_size=139"):
        dpcda.check_class_sizes(class_sizes=[139, 138, 150], min_class_size=139)


def test_bad_targets_are_refused():
    setup = _setup(clip_norm=1.0)
    for eps in (0.0, -1.0):
        with pytest.raises(ValueError, match="target_epsilon must be > 0"):
            dpcda.calibrate_sigma_x(setup, target_epsilon=eps, sigma_ratio=1.0)
    with pytest.raises(ValueError, match="unreachable"):
        dpcda.calibrate_sigma_x(setup, target_epsilon=1e-9, sigma_ratio=1.0)


def _dp_accounting_same_label(*, rate_num, rate_den, z, draws, orders):
    """dp-accounting's RDP of the same-label case: ``draws`` l-of-n subsamples without
    replacement (REPLACE_ONE), and of the same draws without amplification."""
    rel = dp_accounting.NeighboringRelation.REPLACE_ONE
    wor = dp_accounting.rdp.RdpAccountant(orders=orders, neighboring_relation=rel).compose(
        dp_accounting.SampledWithoutReplacementDpEvent(
            rate_den, rate_num, dp_accounting.GaussianDpEvent(z)), draws)
    plain = dp_accounting.rdp.RdpAccountant(orders=orders, neighboring_relation=rel).compose(
        dp_accounting.GaussianDpEvent(z), draws)
    return wor.rdp, plain.rdp


# (l, n_min, σx, T): the digits release (l = 4, T = 1437, c = 4), larger l on digits, the MNIST
# scale of Saha et al. 2024 (c = 1), and l close to the class size, where the un-amplified curve
# decides.
SAME_LABEL_SETTINGS = [(4, 130, 4.7, 1437), (32, 130, 0.9, 1437), (4, 5421, 0.3, 60000),
                       (16, 5421, 0.14, 60000), (129, 130, 4.0, 1437)]


@pytest.mark.parametrize("order,n_min,sigma_x,num_synthetic", SAME_LABEL_SETTINGS)
def test_same_label_case_is_dp_accountings_sampled_without_replacement(order, n_min, sigma_x,
                                                                      num_synthetic):
    """Per order, our bound is dp-accounting's ``SampledWithoutReplacementDpEvent`` or, where
    that is larger, dp-accounting's un-amplified Gaussian: never below the smaller of the two,
    equal to it. In ε (dp-accounting's conversion) likewise. Orders up to 32: above them
    dp-accounting's float sums drift upward at small ρ (accounting/without_replacement.py)."""
    setup = dpcda.MixingSetup(order=order, clip_norm=4.0 if n_min == 130 else 1.0, num_classes=10,
                              min_class_size=n_min, num_records=num_synthetic,
                              num_synthetic=num_synthetic, delta=1e-5)
    p = dpcda.mixing_epsilon(setup, sigma_x=sigma_x, sigma_y=None, orders=range(2, 33))
    orders = [float(a) for a in range(2, 33)]
    wor, plain = _dp_accounting_same_label(rate_num=order, rate_den=n_min,
                                           z=p.noise_multiplier, draws=p.draws_same_label,
                                           orders=orders)
    ours = p.draws_same_label * without_replacement.subsampled_gaussian_rdp(
        sampling_rate=order / n_min, noise_multiplier=p.noise_multiplier, orders=range(2, 33))
    np.testing.assert_allclose(ours, np.minimum(wor, plain), rtol=1e-9)
    expected, best = dp_accounting.rdp.compute_epsilon(orders, np.minimum(wor, plain), 1e-5)
    assert p.epsilon_same_label == pytest.approx(expected, rel=1e-9)
    assert p.best_order == best
    assert 0.1 < p.epsilon_same_label < 100  # a setting where the comparison means something
    if order / n_min < 0.5:  # amplification decides: dp-accounting's own event alone
        assert p.epsilon_same_label == pytest.approx(
            dp_accounting.rdp.compute_epsilon(orders, wor, 1e-5)[0], rel=1e-9)


def test_a_negative_rdp_rounding_error_does_not_zero_epsilon():
    """dp-accounting's conversion reads an order with RDP < 0 (a rounding error: RDP is a
    divergence) as ε = 0 and returns the minimum; ours clips RDP at 0 first, which only raises
    ε, and has no such shortcut."""
    orders = [2, 3, 4]
    rdp = np.array([-0.5, 20.0, 30.0])
    assert dp_accounting.rdp.compute_epsilon(orders, rdp, 1e-5)[0] == 0.0  # the hazard
    eps, order = dpcda._epsilon(rdp, orders, 1e-5)
    clipped = balle2020_curve(rdp=[0.0, 20.0, 30.0], orders=orders, delta=1e-5)
    assert eps == pytest.approx(clipped.min()) and order == orders[int(np.argmin(clipped))]
    assert eps > 5
