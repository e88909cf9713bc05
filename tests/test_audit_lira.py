"""LiRA statistics (audit/lira.py) and attack metrics (audit/metrics.py) on cases with known
answers: Gaussian scores with a planted member shift, a model that memorises, and no leak."""

import math

import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from audit import lira, metrics

M, N = 64, 300


def _planted(shift, seed=0, spread=1.0):
    """φ = μ_j + shift·[member] + N(0, spread²): per-example means differ, the shift is known."""
    rng = np.random.default_rng(seed)
    inclusion = lira.balanced_inclusion(rng, M, N)
    mu = rng.normal(0.0, 3.0, size=N)
    scores = mu + shift * inclusion + spread * rng.normal(size=(M, N))
    return scores, inclusion


def test_log_odds_is_exact_and_finite_where_probabilities_saturate():
    logits = jnp.array([[2.0, -1.0, 0.5], [1000.0, -1000.0, 0.0], [-50.0, 50.0, 0.0]])
    labels = jnp.array([0, 0, 0])
    phi = np.asarray(lira.log_odds_confidence(logits, labels))
    p = np.exp(2.0) / (np.exp(2.0) + np.exp(-1.0) + np.exp(0.5))
    assert phi[0] == pytest.approx(math.log(p / (1 - p)), rel=1e-6)
    assert phi[1] == pytest.approx(1000.0, rel=1e-6) and np.isfinite(phi[1])  # p = 1 in float32
    assert phi[2] == pytest.approx(-100.0, rel=1e-6)


def test_inclusion_is_balanced_per_example_and_about_half_per_model():
    inc = lira.balanced_inclusion(np.random.default_rng(1), M, N)
    assert np.all(inc.sum(axis=0) == M // 2)
    assert np.all(np.abs(inc.sum(axis=1) - N / 2) < 5 * math.sqrt(N / 4))
    with pytest.raises(ValueError, match="even"):
        lira.balanced_inclusion(np.random.default_rng(1), 5, N)


def test_fits_leave_the_attacked_model_out():
    scores, inclusion = _planted(1.0)
    stat = lira.lira_statistic(scores, inclusion, kind="offline")
    i, j = 3, 7
    others = [k for k in range(M) if k != i and not inclusion[k, j]]
    mu, sd = scores[others, j].mean(), scores[others, j].std(ddof=1)
    assert stat[i, j] == pytest.approx(stats.norm.cdf((scores[i, j] - mu) / sd), rel=1e-10)


@pytest.mark.parametrize("shift", [0.0, 1.0, 2.0])
def test_asr_matches_the_planted_shift(shift):
    """Offline guesses 'in' iff φ > μ_out: right on members w.p. Φ(shift), on non-members w.p.
    1/2, so ASR = (Φ(shift) + 1/2)/2. Online thresholds at the midpoint: ASR = Φ(shift/2)."""
    scores, inclusion = _planted(shift)
    for kind, expected in (("offline", (stats.norm.cdf(shift) + 0.5) / 2),
                           ("online", stats.norm.cdf(shift / 2))):
        stat = lira.lira_statistic(scores, inclusion, kind=kind)
        asr = lira.per_example_asr(lira.member_guess(stat, kind=kind), inclusion)
        assert np.mean(asr) == pytest.approx(expected, abs=0.02), kind
        assert lira.asr_max(asr) >= np.mean(asr)


def test_no_leak_means_guessing():
    scores, inclusion = _planted(0.0, seed=3)
    stat = lira.lira_statistic(scores, inclusion, kind="online")
    m = metrics.attack_metrics(stat, inclusion, delta=1e-5)
    assert m.auc == pytest.approx(0.5, abs=0.02)
    assert m.epsilon_lower_bound < 0.1  # nothing to find
    asr = lira.per_example_asr(lira.member_guess(stat, kind="online"), inclusion)
    # the max of N binomial ASRs over M trials sits above 1/2 by chance only.
    assert lira.asr_max(asr) < 0.5 + 4 * math.sqrt(0.25 / M)


def test_chance_level_of_asr_max_matches_simulation():
    level = lira.chance_asr_max(16, 1437)
    assert level == 0.875  # 14/16: P(max <= 13/16) = F(13)^1437 < 1/2 <= F(14)^1437
    rng = np.random.default_rng(0)
    sims = [rng.binomial(16, 0.5, 1437).max() / 16 for _ in range(200)]
    assert np.median(sims) == level


def test_a_memorising_model_is_caught():
    """Members score +10 above their out-distribution: online LiRA is right on every pair, the
    AUC is 1 and the ε lower bound is large."""
    scores, inclusion = _planted(10.0, seed=4, spread=0.5)
    stat = lira.lira_statistic(scores, inclusion, kind="online")
    asr = lira.per_example_asr(lira.member_guess(stat, kind="online"), inclusion)
    assert np.all(asr == 1.0)
    m = metrics.attack_metrics(stat, inclusion, delta=1e-5)
    assert m.auc == 1.0 and m.tpr_at_fpr == (1.0, 1.0)
    assert m.epsilon_lower_bound > 5.0
    assert (m.num_in, m.num_out) == (M * N // 2, M * N // 2)


def test_lira_attacks_summarises_both_kinds():
    """metrics.lira_attacks: the per-kind summary both audits report, equal to the pieces."""
    scores, inclusion = _planted(10.0, seed=4, spread=0.5)
    out = metrics.lira_attacks(scores, inclusion, delta=1e-5)
    assert list(out) == list(lira.KINDS)
    assert out["online"]["asr_max"] == 1.0 and out["online"]["auc"] == 1.0
    stat = lira.lira_statistic(scores, inclusion, kind="offline")
    asr = lira.per_example_asr(lira.member_guess(stat, kind="offline"), inclusion)
    assert out["offline"]["asr_mean"] == float(asr.mean())
    assert out["offline"]["epsilon_lower_bound"] == metrics.attack_metrics(
        stat, inclusion, delta=1e-5).epsilon_lower_bound


def test_bad_inputs():
    scores, inclusion = _planted(1.0)
    with pytest.raises(ValueError, match="kind"):
        lira.lira_statistic(scores, inclusion, kind="shadow")
    with pytest.raises(ValueError, match="models, examples"):
        lira.lira_statistic(scores[:, :5], inclusion)
    few = np.zeros((4, 3), bool)
    few[:1] = True  # each example IN in one model only
    with pytest.raises(ValueError, match="train more shadow models"):
        lira.lira_statistic(np.zeros((4, 3)), few, kind="online")
