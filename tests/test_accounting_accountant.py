"""ε by PLD and RDP, sampling schemes, adjacency relations and calibration."""

import math

import dp_accounting
import numpy as np
import pytest

from maskdp_jax import accounting
from maskdp_jax.accounting import accountant

NTU_Q = 128 / 40320
NTU_STEPS = 47250  # 150 epochs of 315 steps

GRID = [
    (q, sigma, steps) for q in (0.004, 0.03) for sigma in (0.8, 1.5, 4.0) for steps in (300, 3000)
]


def eps(**kwargs):
    args = dict(delta=1e-5)
    args.update(kwargs)
    return accounting.epsilon(**args)


@pytest.mark.parametrize("q,sigma,steps", GRID)
def test_pld_at_most_rdp(q, sigma, steps):
    pld = eps(q=q, noise_multiplier=sigma, steps=steps, method="pld")
    rdp = eps(q=q, noise_multiplier=sigma, steps=steps, method="rdp")
    assert 0 < pld <= rdp


@pytest.mark.parametrize("method", ["pld", "rdp"])
@pytest.mark.parametrize("sampling", ["decoupled", "coupled"])
def test_monotone_in_sigma_steps_and_q(method, sampling):
    # NTU-like q and steps (fast: many small steps); few-step cases are in GRID.
    kw = dict(method=method, sampling=sampling)
    by_sigma = [eps(q=0.003, noise_multiplier=s, steps=20000, **kw) for s in (1.5, 2, 3, 4, 6)]
    by_steps = [eps(q=0.003, noise_multiplier=3, steps=t, **kw) for t in (300, 3000, 30000, 60000)]
    by_q = [eps(q=q, noise_multiplier=3, steps=20000, **kw) for q in (0.001, 0.003, 0.006, 0.012)]
    assert all(a > b for a, b in zip(by_sigma, by_sigma[1:], strict=False)), by_sigma
    assert all(a < b for a, b in zip(by_steps, by_steps[1:], strict=False)), by_steps
    assert all(a < b for a, b in zip(by_q, by_q[1:], strict=False)), by_q


def test_special_equals_add_remove():
    q, sigma, steps, delta = 0.01, 1.0, 2000, 1e-5
    event = dp_accounting.SelfComposedDpEvent(
        dp_accounting.PoissonSampledDpEvent(q, dp_accounting.GaussianDpEvent(sigma)), steps
    )
    rdp = dp_accounting.rdp.RdpAccountant(
        orders=list(accountant.RDP_ORDERS),
        neighboring_relation=dp_accounting.NeighboringRelation.ADD_OR_REMOVE_ONE,
    )
    rdp.compose(event)
    assert eps(q=q, noise_multiplier=sigma, steps=steps, method="rdp") == rdp.get_epsilon(delta)
    segment = accounting.Segment(q=q, noise_multiplier=sigma, steps=steps)
    interval = accountant.pld_interval((segment,), delta, "special", "decoupled")
    pld = dp_accounting.pld.PLDAccountant(
        dp_accounting.NeighboringRelation.ADD_OR_REMOVE_ONE, value_discretization_interval=interval
    )
    pld.compose(event)
    assert eps(q=q, noise_multiplier=sigma, steps=steps, method="pld") == pytest.approx(
        pld.get_epsilon(delta), rel=1e-12
    )


def test_spec_numbers_ntu():
    kw = dict(q=NTU_Q, steps=NTU_STEPS, delta=1e-6)
    assert accounting.epsilon(noise_multiplier=1.0, **kw) == pytest.approx(4.44, abs=0.01)
    assert accounting.epsilon(noise_multiplier=1.0, adjacency="replace", **kw) == pytest.approx(
        7.74, abs=0.01
    )
    assert accounting.epsilon(noise_multiplier=3.0, method="rdp", **kw) == pytest.approx(
        1.08, abs=0.005
    )
    assert accounting.epsilon(
        noise_multiplier=3.0, method="rdp", sampling="coupled", **kw
    ) == pytest.approx(29.9, abs=0.05)


@pytest.mark.parametrize("q,sigma,steps", GRID[::2])
def test_replace_at_least_special(q, sigma, steps):
    special = eps(q=q, noise_multiplier=sigma, steps=steps)
    replace = eps(q=q, noise_multiplier=sigma, steps=steps, adjacency="replace")
    assert replace > special


def _revealed_sample_rdp_epsilon(q, sigma, steps, delta, sensitivity=1.0):
    """Independent closed form: Σ steps/(α-1)·log(1-q+q·e^{α(α-1)Δ²/(2σ²)}), Balle 2020."""
    alphas = np.array(accountant.RDP_ORDERS)
    x = alphas * (alphas - 1) * sensitivity**2 / (2 * sigma**2)
    rdp = steps * np.logaddexp(np.log1p(-q), np.log(q) + x) / (alphas - 1)
    eps_alpha = rdp + np.log1p(-1 / alphas) - (math.log(delta) + np.log(alphas)) / (alphas - 1)
    return float(np.min(eps_alpha))


@pytest.mark.parametrize("q,sigma,steps", GRID)
def test_coupled_at_least_decoupled_and_equals_closed_form(q, sigma, steps):
    for method in ("rdp", "pld"):
        dec = eps(q=q, noise_multiplier=sigma, steps=steps, method=method)
        cou = eps(q=q, noise_multiplier=sigma, steps=steps, method=method, sampling="coupled")
        assert cou >= dec
    closed = _revealed_sample_rdp_epsilon(q, sigma, steps, 1e-5)
    ours = eps(q=q, noise_multiplier=sigma, steps=steps, method="rdp", sampling="coupled")
    assert ours == pytest.approx(closed, rel=1e-9)
    closed_replace = _revealed_sample_rdp_epsilon(q, sigma, steps, 1e-5, sensitivity=2.0)
    ours_replace = eps(
        q=q,
        noise_multiplier=sigma,
        steps=steps,
        method="rdp",
        sampling="coupled",
        adjacency="replace",
    )
    assert ours_replace == pytest.approx(closed_replace, rel=1e-9)


@pytest.mark.parametrize("adjacency,sensitivity", [("special", 1.0), ("replace", 2.0)])
def test_coupled_pld_single_step_is_scaled_gaussian(adjacency, sensitivity):
    """One revealed-sample step: δ(ε) = q·δ_Gauss(ε), so ε(δ) = ε_Gauss(δ/q)."""
    q, sigma, delta = 0.05, 2.0, 1e-5
    ours = eps(q=q, noise_multiplier=sigma, steps=1, sampling="coupled", adjacency=adjacency)
    exact = dp_accounting.get_epsilon_gaussian(sigma / sensitivity, delta / q)
    assert exact <= ours <= exact + 1e-3


SUPPORT = [  # (method, adjacency, sampling, covered)
    ("pld", "special", "decoupled", True),
    ("pld", "replace", "decoupled", True),
    ("pld", "special", "coupled", True),
    ("pld", "replace", "coupled", True),
    ("rdp", "special", "decoupled", True),
    ("rdp", "replace", "decoupled", False),  # no RDP bound for Poisson + REPLACE_ONE
    ("rdp", "special", "coupled", True),
    ("rdp", "replace", "coupled", True),  # revealed batch: a plain Gaussian under both
]


@pytest.mark.parametrize("method,adjacency,sampling,covered", SUPPORT)
def test_supports_says_which_combinations_an_accountant_covers(method, adjacency, sampling,
                                                               covered):
    assert accounting.supports(method, adjacency=adjacency, sampling=sampling) is covered
    reason = accounting.unsupported_reason(method, adjacency=adjacency, sampling=sampling)
    assert (reason is None) is covered
    if covered:
        accounting.epsilon(q=0.01, noise_multiplier=1.0, steps=10, delta=1e-5, method=method,
                           adjacency=adjacency, sampling=sampling)
    else:
        assert "REPLACE_ONE" in reason
        with pytest.raises(ValueError) as err:
            accounting.epsilon(q=0.01, noise_multiplier=1.0, steps=10, delta=1e-5,
                               method=method, adjacency=adjacency, sampling=sampling)
        assert str(err.value) == reason


@pytest.mark.parametrize("bad", [dict(method="prv"), dict(adjacency="swap"),
                                 dict(sampling="shared")])
def test_supports_refuses_unknown_names(bad):
    args = {"method": "pld", "adjacency": "special", "sampling": "decoupled", **bad}
    with pytest.raises(ValueError, match=next(iter(bad))):
        accounting.supports(args.pop("method"), **args)


def test_zero_noise_and_zero_steps():
    assert eps(q=0.01, noise_multiplier=0.0, steps=10) == math.inf
    assert eps(q=0.01, noise_multiplier=0.0, steps=10, method="rdp") == math.inf
    assert eps(q=0.01, noise_multiplier=1.0, steps=0) == 0.0


@pytest.mark.parametrize(
    "method,adjacency,sampling,target",
    [
        ("pld", "special", "decoupled", 1.0),
        ("rdp", "special", "decoupled", 3.0),
        ("pld", "replace", "decoupled", 2.0),
        ("pld", "special", "coupled", 8.0),
        ("rdp", "replace", "coupled", 8.0),
    ],
)
def test_calibration_meets_target_and_is_smallest(method, adjacency, sampling, target):
    kw = dict(
        delta=1e-6,
        q=NTU_Q,
        steps=NTU_STEPS if sampling == "decoupled" else 3000,
        method=method,
        adjacency=adjacency,
        sampling=sampling,
    )
    sigma = accounting.calibrate_noise_multiplier(target_epsilon=target, **kw)
    eps_kw = {k: v for k, v in kw.items()}
    assert accounting.epsilon(noise_multiplier=sigma, **eps_kw) <= target
    assert accounting.epsilon(noise_multiplier=sigma * (1 - 1e-3), **eps_kw) > target


@pytest.mark.parametrize(
    "kwargs,err,match",
    [
        (dict(target_epsilon=1e-7), ValueError, "unreachable"),
        (dict(target_epsilon=1e6), ValueError, "so large"),
        (dict(target_epsilon=0.0), ValueError, "target_epsilon"),
        (dict(target_epsilon=-1.0), ValueError, "target_epsilon"),
        (dict(target_epsilon=math.inf), ValueError, "target_epsilon"),
        (dict(q=1.0), ValueError, "q"),
        (dict(q=1.5), ValueError, "q"),
        (dict(q=0.0), ValueError, "q"),
        (dict(steps=0), ValueError, "steps"),
        (dict(steps=-5), ValueError, "steps"),
        (dict(steps=10.0), TypeError, "steps"),
        (dict(delta=0.0), ValueError, "delta"),
        (dict(delta=1.0), ValueError, "delta"),
        (dict(delta=1e-3, num_examples=1000), ValueError, "1/N"),
        (dict(method="rdp", adjacency="replace"), ValueError, "RDP cannot"),
        (dict(method="moments"), ValueError, "method"),
        (dict(adjacency="substitute"), ValueError, "adjacency"),
        (dict(sampling="shared"), ValueError, "sampling"),
    ],
)
def test_calibration_bad_inputs(kwargs, err, match):
    args = dict(target_epsilon=1.0, delta=1e-6, q=0.01, steps=100)
    args.update(kwargs)
    with pytest.raises(err, match=match):
        accounting.calibrate_noise_multiplier(**args)


@pytest.mark.parametrize(
    "kwargs,err,match",
    [
        (dict(noise_multiplier=-1.0), ValueError, "noise_multiplier"),
        (dict(noise_multiplier=math.nan), ValueError, "noise_multiplier"),
        (dict(noise_multiplier="1.0"), TypeError, "noise_multiplier"),
        (dict(q=1.0), ValueError, "q"),
        (dict(q=-0.1), ValueError, "q"),
        (dict(steps=-1), ValueError, "steps"),
        (dict(steps=True), TypeError, "steps"),
        (dict(delta=0.0), ValueError, "delta"),
        (dict(delta=2.0), ValueError, "delta"),
        (dict(method="rdp", adjacency="replace"), ValueError, "RDP cannot"),
        (dict(method="prv"), ValueError, "method"),
    ],
)
def test_epsilon_bad_inputs(kwargs, err, match):
    args = dict(q=0.01, noise_multiplier=1.0, steps=100, delta=1e-5)
    args.update(kwargs)
    with pytest.raises(err, match=match):
        accounting.epsilon(**args)


@pytest.mark.parametrize(
    "delta,n,ok",
    [
        (1e-6, 40320, True),
        (1e-5, 9537, True),
        (1e-4, 10000, False),
        (2e-4, 10000, False),
        (0.0, 10, False),
        (1e-5, 0, False),
    ],
)
def test_check_delta_refuses_delta_at_least_one_over_n(delta, n, ok):
    if ok:
        accounting.check_delta(delta=delta, num_examples=n)
    else:
        with pytest.raises(ValueError):
            accounting.check_delta(delta=delta, num_examples=n)


def test_pld_discretization_is_monotone_and_bounded():
    scales = np.geomspace(0.01, 1000, 200)
    for step_range in (0.0, 1.0, 30.0):
        grid = [accountant.pld_discretization(s, step_range) for s in scales]
        assert all(a <= b for a, b in zip(grid, grid[1:], strict=False))
        for s, d in zip(scales, grid, strict=True):
            bound = max(
                accountant.PLD_RELATIVE_INTERVAL * s,
                step_range / accountant.PLD_MAX_STEP_BINS,
                accountant.PLD_MIN_INTERVAL,
            )
            assert bound / 10**0.25 <= d <= bound


@pytest.mark.parametrize("q,sigma", [(128 / 3570, 0.7), (0.01, 1.0), (0.1, 2.0)])
def test_rdp_curve_upper_bounds_exact_renyi_divergence(q, sigma):
    """Our RDP (dp-accounting's, incl. fractional orders) is >= the exact divergence.

    D_α((1-q)N(0,σ²) + qN(1,σ²) || N(0,σ²)) by numerical integration; a smaller
    value from the accountant would make the reported ε unsound.
    """
    from scipy import integrate, stats

    segment = accounting.Segment(q=q, noise_multiplier=sigma, steps=1)
    curve = accountant._rdp_curve((segment,), "special", "decoupled")
    orders = np.asarray(accountant.RDP_ORDERS)
    for alpha in (1.5, 1.7, 3.7):
        (index,) = np.flatnonzero(np.isclose(orders, alpha))

        def integrand(x, alpha=alpha):
            ratio = math.exp((2 * x - 1) / (2 * sigma**2))
            return stats.norm.pdf(x, scale=sigma) * ((1 - q) + q * ratio) ** alpha

        pieces = [(-30 * sigma, 0.0), (0.0, 5.0), (5.0, 30 * sigma + 1)]
        total = sum(
            integrate.quad(integrand, a, b, epsabs=0, epsrel=1e-12, limit=500)[0] for a, b in pieces
        )
        exact = math.log(total) / (alpha - 1)
        assert curve[index] >= exact * (1 - 1e-9), (alpha, curve[index], exact)


@pytest.mark.parametrize("adjacency", ["special", "replace"])
def test_pld_equals_dp_accountings_pld_accountant_exactly(adjacency):
    """Our PLD composition (one-step PLD cached, self-composed per segment) is the value that
    dp-accounting's PLDAccountant gives for the same composed event and grid, to the bit, for a
    heterogeneous history and for each prefix of a run (the rows a training log asks for)."""
    from dp_accounting.pld import pld_privacy_accountant

    from maskdp_jax.accounting import events

    histories = [
        (events.Segment(q=0.0625, noise_multiplier=3.9, steps=s),) for s in (10, 20, 256)
    ] + [(events.Segment(q=0.03, noise_multiplier=1.2, steps=40),
          events.Segment(q=0.06, noise_multiplier=0.9, steps=15),
          events.Segment(q=0.03, noise_multiplier=1.2, steps=5))]
    for segments in histories:
        interval = accountant.pld_interval(segments, 1e-5, adjacency, "decoupled")
        reference = pld_privacy_accountant.PLDAccountant(
            neighboring_relation=events.neighboring_relation(adjacency),
            value_discretization_interval=interval)
        reference.compose(events.decoupled_event(segments))
        accountant.clear_caches()
        ours = accountant.history_epsilon(segments, delta=1e-5, adjacency=adjacency)
        assert ours == float(reference.get_epsilon(1e-5)), segments


def test_calibration_to_a_tiny_target_where_the_rdp_curve_reaches_zero():
    """With δ = 1e-3 and a large σ the conversion gives ε = 0 exactly; calibrating to ε = 1e-6
    used to fail with 'math domain error' (the log of the RDP curve's slope at 0)."""
    sigma = accountant.calibrate_noise_multiplier(target_epsilon=1e-6, delta=1e-3, q=0.25,
                                                  steps=64)
    assert accountant.epsilon(noise_multiplier=sigma, q=0.25, steps=64, delta=1e-3) <= 1e-6
