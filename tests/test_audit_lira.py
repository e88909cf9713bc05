"""LiRA statistics (audit/lira.py) and attack metrics (audit/metrics.py) on cases with known
answers: Gaussian scores with a planted member shift, a model that memorises, and no leak."""

import math

import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from maskdp_jax.audit import lira, metrics

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


def test_lira_attacks_summarises_every_variant():
    """metrics.lira_attacks: Gu & Chen 2024's fits, the configured fits, and the configured fits on
    every query, each equal to the pieces and each with its own null."""
    scores, inclusion = _planted(10.0, seed=4, spread=0.5)
    two = np.stack([scores, scores + 0.1], axis=-1)  # two queries
    out = metrics.lira_attacks(two, inclusion, delta=1e-5, null_draws=20)
    assert list(out) == ["offline_seed004", "online_seed004", "offline", "online", "offline_aug",
                         "online_aug"]
    assert out["online"]["asr_max"] == 1.0 and out["online"]["auc"] == 1.0
    assert out["online_aug"]["queries"] == 2 and out["online"]["queries"] == 1
    assert out["offline_seed004"]["fit"] == "per-example σ, mean"
    assert out["offline"]["fit"] == "per-example σ, mean"  # 64 models: "auto" is per-example
    stat = lira.lira_statistic(scores, inclusion, kind="offline")
    asr = lira.per_example_asr(lira.member_guess(stat, kind="offline"), inclusion)
    assert out["offline_seed004"]["asr_mean"] == float(asr.mean())
    assert out["offline_seed004"]["epsilon_lower_bound"] == metrics.attack_metrics(
        stat, inclusion, delta=1e-5).epsilon_lower_bound
    assert out["online"]["null"]["asr_max"]["mean"] > out["offline"]["null"]["asr_max"]["mean"]


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


# --------------------------------------------------------------------------- reported figures


def test_standard_auc_and_empirical_tpr_on_known_answers():
    """Mann–Whitney AUC = the pairwise win rate, ties half; TPR read on the empirical ROC (the
    threshold admits at most ⌊f·n_out⌋ OUT scores), never interpolated."""
    a, b = np.array([3.0, 2.0, 2.0, 0.0]), np.array([2.0, 1.0, -1.0])
    pairs = np.mean([(x > y) + 0.5 * (x == y) for x in a for y in b])
    assert metrics.standard_auc(a, b) == pytest.approx(pairs)
    out = np.arange(100.0)  # OUT scores 0..99
    inn = np.array([99.5, 98.5, 97.5, 50.0])
    # 1 % of 100: one OUT score may pass (99); 0.1 %: none.
    assert metrics.empirical_tpr_at_fpr(inn, out, (0.001, 0.01)) == (0.25, 0.25)
    assert metrics.empirical_tpr_at_fpr(inn, out, (0.03,)) == (0.75,)
    with pytest.raises(ValueError, match="IN and OUT"):
        metrics.standard_auc([], b)


def test_standard_auc_sees_a_planted_leak_and_stays_in_its_null_band_without_one():
    """The reported AUC against its simulated null (iid scores, the same counts): a planted shift
    of half a standard deviation lies clearly above the 95 % band, scores with no leak inside it,
    both for raw attack scores and for online LiRA run on shadow-model scores. The hull's AUC
    (jax_privacy) of the same no-leak scores sits above 0.5 on average: why it is not the
    reported figure."""
    rng = np.random.default_rng(11)
    n_in = n_out = 200
    band = metrics.score_null(n_in, n_out)["auc"]
    assert band.mean == pytest.approx(0.5, abs=0.01) and band.high < 0.57
    leak = metrics.standard_auc(rng.normal(0.5, 1, n_in), rng.normal(0, 1, n_out))
    none = metrics.standard_auc(rng.normal(0, 1, n_in), rng.normal(0, 1, n_out))
    assert leak > band.high + 0.03 and band.contains(none)
    hull = [metrics.attack_metrics(rng.normal(size=128), np.arange(128) < 64,
                                   delta=1e-5).auc_hull for _ in range(30)]
    assert np.mean(hull) > 0.53  # the hull's no-leak level is not 0.5

    from maskdp_jax.audit import shadows  # noqa: PLC0415  (the design the audits use)
    inclusion = shadows.complementary_inclusion(np.random.default_rng(2), 16, 64)
    null = metrics.lira_null(inclusion, kind="online", options=lira.Options())["auc"]
    base = rng.normal(0, 2, 64) + rng.normal(size=(16, 64))
    for shift, inside in ((0.0, True), (0.6, False)):
        stat = lira.lira_statistic(base + shift * inclusion, inclusion, kind="online",
                                   options=lira.Options())
        auc = metrics.standard_auc(stat[inclusion], stat[~inclusion])
        assert null.contains(auc) == inside and (inside or auc > null.high + 0.03), (shift, auc)


def test_asr_max_null_differs_between_offline_and_online():
    """With 16 models and 64 examples and nothing to find, offline ASR^M centres on the binomial
    chance level 0.75 and online ASR^M on about 0.81: one line cannot serve both."""
    from maskdp_jax.audit import shadows  # noqa: PLC0415

    inclusion = shadows.complementary_inclusion(np.random.default_rng(0), 16, 64)
    offline = metrics.lira_null(inclusion, kind="offline", draws=300)["asr_max"]
    online = metrics.lira_null(inclusion, kind="online", draws=300)["asr_max"]
    assert offline.mean == pytest.approx(0.76, abs=0.02)
    assert lira.chance_asr_max(16, 64) == 0.75
    assert online.mean == pytest.approx(0.81, abs=0.02) and online.low >= 0.75


def test_epsilon_bound_uses_a_fixed_grid():
    """The bound is the best of the pre-declared FPR levels at significance / their number:
    a perfect attack's bound equals the level-by-level maximum; scores without a leak certify
    nothing; a bad grid is refused."""
    from jax_privacy import auditing  # noqa: PLC0415

    rng = np.random.default_rng(3)
    a, b = rng.normal(4, 1, 500), rng.normal(0, 1, 500)
    bound = metrics.epsilon_lower_bound(a, b, delta=1e-5)
    auditor = auditing.CanaryScoreAuditor(a, b)
    out = np.sort(b)[::-1]
    levels = [auditor.epsilon_clopper_pearson(0.05 / len(metrics.BOUND_FPRS), 1e-5,
                                              threshold_strategy=auditing.Explicit(
                                                  out[int(f * 500) - 1] if f * 500 >= 1
                                                  else np.nextafter(out[0], np.inf)))
              for f in metrics.BOUND_FPRS]
    assert bound == pytest.approx(max(levels)) and bound > 2.0
    assert metrics.epsilon_lower_bound(rng.normal(size=500), b, delta=1e-5) < 0.3
    with pytest.raises(ValueError, match="fprs"):
        metrics.epsilon_lower_bound(a, b, delta=1e-5, fprs=(0.0, 0.1))


# --------------------------------------------------------------------------- LiRA options


def test_fixed_variance_makes_online_lira_stronger_with_few_shadow_models():
    """16 shadow models, examples whose scores share one spread: a per-example σ from 7 scores is
    noise, one global σ is not; the online attack gains (Carlini et al.'s advice), yet with a
    small leak it stays below offline."""
    from maskdp_jax.audit import shadows  # noqa: PLC0415

    rng = np.random.default_rng(0)
    inclusion = shadows.complementary_inclusion(rng, 16, 200)
    scores = rng.normal(0, 3, 200) + 0.7 * inclusion + rng.normal(size=(16, 200))
    aucs = {}
    for kind, variance in (("online", "per_example"), ("online", "global"),
                           ("offline", "global")):
        stat = lira.lira_statistic(scores, inclusion, kind=kind,
                                   options=lira.Options(variance=variance))
        aucs[kind, variance] = metrics.standard_auc(stat[inclusion], stat[~inclusion])
    assert aucs["online", "global"] > aucs["online", "per_example"] + 0.02
    # A leak of 0.7 σ against μ_in − μ_out estimated from 8 + 8 models (its own spread 0.5 σ):
    # online must learn each example's direction and is still below offline, which assumes it.
    assert aucs["offline", "global"] > aucs["online", "global"] + 0.01
    assert lira.Options().resolved_variance(16) == "global"
    assert lira.Options().resolved_variance(64) == "per_example"


def test_median_fit_ignores_a_diverged_shadow_model_and_queries_average():
    """The median centre is unmoved by one model scoring +1000 on an example, where the mean
    jumps; an identical second query leaves the statistic unchanged; bad options are refused."""
    scores, inclusion = _planted(1.0, seed=6)
    broken = scores.copy()
    j = 5
    outside = np.flatnonzero(~inclusion[:, j])
    broken[outside[0], j] = 1000.0
    rest = np.delete(np.arange(M), outside[0])  # the models whose OUT fit includes it
    for estimator, bound in (("mean", 10.0), ("median", 1.0)):  # median: one order statistic
        before, _ = lira._loo_fit(scores[..., None], ~inclusion, estimator=estimator)
        after, _ = lira._loo_fit(broken[..., None], ~inclusion, estimator=estimator)
        moved = np.abs(after - before)[rest, j, 0]
        assert (moved.min() > bound) if estimator == "mean" else (moved.max() < bound)
    for kind in lira.KINDS:
        one = lira.lira_statistic(scores, inclusion, kind=kind, options=lira.Options())
        two = lira.lira_statistic(np.stack([scores, scores], -1), inclusion, kind=kind,
                                  options=lira.Options())
        np.testing.assert_allclose(two, one, rtol=1e-12)
    with pytest.raises(ValueError, match="variance must be one of"):
        lira.Options(variance="fixed")
    with pytest.raises(ValueError, match="estimator must be one of"):
        lira.Options(estimator="mode")
