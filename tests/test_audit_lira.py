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
    # 9,600 OUT trials resolve 1 % FPR (>= 1,000) but not 0.1 % (>= 10,000).
    assert m.auc == 1.0 and m.tpr_at_fpr == (None, 1.0)
    assert m.unresolved == {"0.001": "not resolved at n = 9600: a TPR at FPR 0.001 needs n >= "
                                     "10000 OUT trials"}
    assert m.epsilon_lower_bound > 5.0 and m.epsilon_lower_bound <= m.cap
    assert (m.num_in, m.num_out) == (M * N // 2, M * N // 2)


def test_lira_attacks_summarises_every_variant():
    """metrics.lira_attacks: Gu & Chen 2024's fits, the configured fits, Carlini et al.'s released
    fixed variance, and the configured fits on every query, each equal to the pieces and each with
    its own null."""
    scores, inclusion = _planted(10.0, seed=4, spread=0.5)
    two = np.stack([scores, scores + 0.1], axis=-1)  # two queries
    out = metrics.lira_attacks(two, inclusion, delta=1e-5, null_draws=20)
    assert list(out) == ["offline_seed004", "online_seed004", "offline", "online",
                         "offline_carlini", "online_carlini", "offline_aug", "online_aug"]
    assert out["online_carlini"]["fit"] == "Carlini's total σ, median"
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
    largest TPR of a threshold that admits at most ⌊f·n_out⌋ OUT scores), never interpolated."""
    a, b = np.array([3.0, 2.0, 2.0, 0.0]), np.array([2.0, 1.0, -1.0])
    pairs = np.mean([(x > y) + 0.5 * (x == y) for x in a for y in b])
    assert metrics.standard_auc(a, b) == pytest.approx(pairs)
    out = np.arange(100.0)  # OUT scores 0..99
    inn = np.array([99.5, 98.5, 97.5, 50.0])
    # 1 % of 100: one OUT score may pass (99), and with it every IN score above 98; 0.1 %: none.
    assert metrics.empirical_tpr_at_fpr(inn, out, (0.001, 0.01)) == (0.25, 0.5)
    assert metrics.empirical_tpr_at_fpr(inn, out, (0.03,)) == (0.75,)
    with pytest.raises(ValueError, match="IN and OUT"):
        metrics.standard_auc([], b)


def test_tpr_at_fpr_is_the_best_roc_point_within_the_level():
    """The review's case: OUT = {5, 4, 98 scores <= 0}, IN = {4.5}. At 1 % FPR one false positive
    is allowed; the threshold 4.5 passes IN and only 5, so TPR = 1 (scikit-learn's ROC says the
    same). On random score sets, with ties, at every level: max(tpr[fpr <= level]) of
    sklearn.metrics.roc_curve (all its points), and the nulls' vectorised figures agree with it."""
    from sklearn.metrics import roc_curve  # noqa: PLC0415

    out = np.concatenate([[5.0, 4.0], -np.arange(98.0)])
    assert metrics.empirical_tpr_at_fpr([4.5], out, (0.01,)) == (1.0,)
    assert metrics.empirical_tpr_at_fpr([4.5], out, (0.001,)) == (0.0,)
    rng = np.random.default_rng(5)
    levels = (0.001, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0)
    for trial in range(60):
        n_in, n_out = rng.integers(1, 400, size=2)
        a, b = rng.normal(0.7, 1, n_in), rng.normal(0, 1, n_out)
        if trial % 2:  # ties within and across the sides
            a, b = np.round(a, 1), np.round(b, 1)
        # every ROC point: the default drops collinear ones, which ties put on the optimum.
        fpr, tpr, _ = roc_curve(np.r_[np.ones(n_in), np.zeros(n_out)], np.r_[a, b],
                                drop_intermediate=False)
        expected = tuple(float(tpr[fpr <= f].max()) for f in levels)
        assert metrics.empirical_tpr_at_fpr(a, b, levels) == pytest.approx(expected, abs=1e-12)
    scores = rng.normal(size=(5, 300)) + 0.5 * (np.arange(300) < 100)
    is_in = np.broadcast_to(np.arange(300) < 100, scores.shape)
    figures = metrics._rank_figures(scores, is_in)
    for d in range(5):
        a, b = scores[d, :100], scores[d, 100:]
        assert tuple(figures[f"tpr@{f:g}"][d] for f in metrics.FPRS) == \
            metrics.empirical_tpr_at_fpr(a, b)


def test_low_fpr_figures_are_reported_only_where_the_out_trials_resolve_them():
    """A TPR at FPR α needs n_out >= 10/α: at 512 OUT trials neither 0.1 % nor 1 % (None in the
    summary, with the reason), at 1,000 the 1 % level, at 10,000 both. The ROC curve keeps every
    point (the plots shade FPR < 1/n_out)."""
    rng = np.random.default_rng(8)
    for n_out, shown in ((512, (False, False)), (1000, (False, True)), (10_000, (True, True))):
        stat = rng.normal(size=200 + n_out) + (np.arange(200 + n_out) < 200)
        m = metrics.attack_metrics(stat, np.arange(200 + n_out) < 200, delta=1e-5,
                                   null={})
        assert tuple(t is not None for t in m.tpr_at_fpr) == shown, n_out
        assert tuple(t is not None for t in m.tpr_at_fpr_hull) == shown
        assert set(m.unresolved) == {f"{f:g}" for f, ok in zip(metrics.FPRS, shown, strict=True)
                                     if not ok}
        assert all(v.startswith(f"not resolved at n = {n_out}") for v in m.unresolved.values())
        assert len(m.roc_tpr) == len(metrics.ROC_FPRS) and None not in m.roc_tpr
        assert m.to_dict()["tpr_rule"] == metrics.TPR_RULE


def test_the_log_log_roc_plot_shades_what_the_out_trials_cannot_resolve(tmp_path, monkeypatch):
    """plots.roc_loglog marks FPR < 1/n_out in every panel (the committed LiRA audit: 512 OUT
    trials per seed), labelled as not resolved."""
    import json  # noqa: PLC0415
    import os  # noqa: PLC0415

    import matplotlib.axes  # noqa: PLC0415

    from maskdp_jax.audit import membership  # noqa: PLC0415
    from maskdp_jax.reporting import plots  # noqa: PLC0415

    spans = []
    real = matplotlib.axes.Axes.axvspan
    monkeypatch.setattr(matplotlib.axes.Axes, "axvspan",
                        lambda ax, lo, hi, **kw: spans.append((lo, hi, kw.get("label")))
                        or real(ax, lo, hi, **kw))
    path = os.path.join(os.path.dirname(__file__), "..", "docs", "results", "audit_synthetic",
                        "report.json")
    with open(path) as f:
        report = json.load(f)
    plots.roc_loglog(membership.table(report), report["roc_fprs"], str(tmp_path / "roc.png"),
                     title="t")
    assert spans == [(metrics.ROC_FPRS[0], 1 / 512, "FPR < 1/512: not resolved")] * 3


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


def test_bound_counts_give_the_bound_at_any_level_and_a_perfect_attack_gives_the_cap():
    """bound_from_counts(bound_counts) is jax_privacy's bound at the same significance (ties
    included) and falls as the significance is split (Bonferroni); a perfect attack reaches the
    cap, 4.53 at 512 + 512 trials and 95 %, and no attack passes it."""
    rng = np.random.default_rng(4)
    for trial in range(8):
        a, b = rng.normal(trial / 2, 1, 512), rng.normal(0, 1, 512)
        if trial % 2:
            a, b = np.round(a, 1), np.round(b, 1)
        counts = metrics.bound_counts(a, b)
        again = metrics.bound_from_counts(counts, num_in=512, num_out=512, delta=1e-3,
                                          significance=0.05)
        assert again == pytest.approx(metrics.epsilon_lower_bound(a, b, delta=1e-3), abs=1e-12)
        split = metrics.bound_from_counts(counts, num_in=512, num_out=512, delta=1e-3,
                                          significance=0.05 / 18)
        assert split <= again
    cap = metrics.largest_certifiable_epsilon(512, 512, delta=1e-3, significance=0.05)
    assert cap == pytest.approx(4.53, abs=0.005)
    perfect = metrics.epsilon_lower_bound(np.arange(512.0) + 1000, np.arange(512.0), delta=1e-3)
    assert perfect == pytest.approx(cap, abs=1e-12)
    assert metrics.largest_certifiable_epsilon(512, 512, delta=1e-3,
                                               significance=0.05 / 18) < cap


def _earlier_summary(a, b, *, delta):
    """An attack summary as reports written before ``tpr_rule`` and ``bound_counts`` stored it:
    ``roc_tpr`` read at the bound's own thresholds (the earlier TPR rule)."""
    d = metrics.attack_metrics(np.r_[a, b], np.arange(a.size + b.size) < a.size, delta=delta,
                               null={}).to_dict()
    out = np.sort(b)[::-1]
    d["roc_tpr"] = [float(np.mean(a >= metrics._bound_threshold(out, f)))
                    for f in metrics.ROC_FPRS]
    for key in ("bound_counts", "tpr_rule", "cap", "unresolved", "epsilon_lower_bound_note"):
        del d[key]
    return d


def test_bounds_of_earlier_reports_are_recovered_from_their_roc_points():
    """At 512 OUT trials every level of the bound's grid has the k of a ROC grid point, so the
    counts of a report that did not store them come back exactly from ``roc_tpr``; at other
    counts they are bracketed. A summary whose bound its ROC points do not give is refused."""
    rng = np.random.default_rng(9)
    a, b = rng.normal(1, 1, 512), rng.normal(0, 1, 512)
    earlier = _earlier_summary(a, b, delta=1e-3)
    exact = metrics.bound_counts(a, b)
    assert metrics.stored_bound_counts(earlier) == tuple((tp, tp, fp) for tp, fp in exact)
    for significance in (0.05, 0.05 / 18):
        low, high = metrics.bound_range(earlier, significance=significance)
        assert low == high == metrics.bound_from_counts(
            exact, num_in=512, num_out=512, delta=1e-3, significance=significance)
    a, b = rng.normal(1, 1, 700), rng.normal(0, 1, 1500)  # 0.05 · 1500 = 75: no grid point
    low, high = metrics.bound_range(_earlier_summary(a, b, delta=1e-3), significance=0.01)
    exact = metrics.bound_from_counts(metrics.bound_counts(a, b), num_in=700, num_out=1500,
                                      delta=1e-3, significance=0.01)
    assert low <= exact <= high
    earlier["epsilon_lower_bound"] += 0.5
    with pytest.raises(ValueError, match="cannot be recovered"):
        metrics.stored_bound_counts(earlier)


def test_the_best_bound_of_a_setting_is_bonferroni_over_attacks_and_seeds():
    """membership.bound_table: the maximum over every (attack, seed) of the bound at 5 % / their
    number, never above the largest uncorrected bound; the cap at that level; ε above the cap is
    marked, whichever table shows it."""
    from maskdp_jax.audit import membership  # noqa: PLC0415

    rng = np.random.default_rng(2)
    inclusion = np.arange(1024) < 512
    rows = []
    for seed in range(3):
        attacks = {}
        for name, shift in (("weak", 0.3), ("strong", 1.0)):
            stat = rng.normal(size=1024) + shift * inclusion
            attacks[name] = metrics.attack_metrics(stat, inclusion, delta=1e-3,
                                                   null={}).to_dict()
        rows.append({"mode": "dp", "epsilon": 4.0, "seed": seed, "attacks": attacks})
    (entry,) = membership.bound_table(rows, ("mode", "epsilon"))
    trials = [a for r in rows for a in r["attacks"].values()]
    expected = max(metrics.bound_from_counts(a["bound_counts"], num_in=512, num_out=512,
                                             delta=1e-3, significance=0.05 / 6) for a in trials)
    assert (entry["attacks"], entry["seeds"]) == (2, 3)
    assert entry["best"] == (expected, expected) and 0 < expected < entry["uncorrected"]
    cap = metrics.largest_certifiable_epsilon(512, 512, delta=1e-3, significance=0.05 / 6)
    assert entry["cap"] == cap and not entry["cannot_fail"]
    lines = membership.bound_lines([entry | {"epsilon": 8.0, "cannot_fail": True}],
                                   ("mode", "epsilon"))
    assert lines[2] == (f"| dp | 8 | 2 attacks × 3 seeds = 6 | {expected:.2f} | {cap:.2f}: "
                        "cannot fail at this ε |")


# --------------------------------------------------------------------------- LiRA options


def test_fixed_variance_makes_online_lira_stronger_with_few_shadow_models():
    """16 shadow models, examples whose scores share one spread: a per-example σ from 7 scores is
    noise, one pooled within-example σ is not; the online attack gains (Carlini et al.'s advice to
    fix σ), yet with a small leak it stays below offline."""
    from maskdp_jax.audit import shadows  # noqa: PLC0415

    rng = np.random.default_rng(0)
    inclusion = shadows.complementary_inclusion(rng, 16, 200)
    scores = rng.normal(0, 3, 200) + 0.7 * inclusion + rng.normal(size=(16, 200))
    aucs = {}
    for kind, variance in (("online", "per_example"), ("online", "pooled"),
                           ("offline", "pooled")):
        stat = lira.lira_statistic(scores, inclusion, kind=kind,
                                   options=lira.Options(variance=variance))
        aucs[kind, variance] = metrics.standard_auc(stat[inclusion], stat[~inclusion])
    assert aucs["online", "pooled"] > aucs["online", "per_example"] + 0.02
    # A leak of 0.7 σ against μ_in − μ_out estimated from 8 + 8 models (its own spread 0.5 σ):
    # online must learn each example's direction and is still below offline, which assumes it.
    assert aucs["offline", "pooled"] > aucs["online", "pooled"] + 0.01
    assert lira.Options().resolved_variance(16) == "pooled"
    assert lira.Options().resolved_variance(64) == "per_example"
    with pytest.raises(ValueError, match="'global' is now 'pooled'"):
        lira.Options(variance="global")


def _carlini_fixed(keep, scores, target):
    """Carlini et al.'s released online attack with ``fix_variance=True``
    (tensorflow/privacy, research/mi_lira_2021/plot.py, ``generate_ours``), transcribed: the
    shadows' scores ``[M, N, A]`` and ``keep [M, N]``, the target's ``[N, A]``; returns the
    member score (their ``-prediction``)."""
    dat_in = np.array([scores[keep[:, j], j, :] for j in range(scores.shape[1])])
    dat_out = np.array([scores[~keep[:, j], j, :] for j in range(scores.shape[1])])
    mean_in, mean_out = np.median(dat_in, 1), np.median(dat_out, 1)
    std = np.std(dat_in)
    pr_in = -stats.norm.logpdf(target, mean_in, std + 1e-30)
    pr_out = -stats.norm.logpdf(target, mean_out, std + 1e-30)
    return -(pr_in - pr_out).mean(1)


def test_carlini_fixed_variance_is_the_total_std_of_their_released_code():
    """variance="carlini_fixed" on a case worked by hand, then against a transcription of
    Carlini et al.'s released code on random scores (each attacked model's shadows = the others).

    By hand: 6 models, 2 videos, models 0-2 IN on both. Attacking model 5 (OUT), the other
    models' IN scores are {1, 2, 3} and {5, 6, 7}: total variance (ddof 0) 28/6 = 14/3 (the
    pooled within-example variance is 1: the spread between the videos is what Carlini's σ adds),
    medians 2 and 6; OUT scores {-1, 0} and {3, 4}: medians -0.5 and 3.5, total variance
    17/4. Online at φ = 2 on video 0: ((2 + 0.5)² − 0²) / (2 · 14/3) = 18.75/28; at φ = 4 on
    video 1: ((0.5)² − 2²) / (2 · 14/3) = −11.25/28. Offline (the OUT scores' total σ):
    Φ((2 + 0.5) / √4.25)."""
    inclusion = np.zeros((6, 2), bool)
    inclusion[:3] = True
    scores = np.array([[1.0, 5.0], [2.0, 6.0], [3.0, 7.0], [-1.0, 3.0], [0.0, 4.0],
                       [2.0, 4.0]])
    online = lira.lira_statistic(scores, inclusion, kind="online", options=lira.CARLINI)
    assert online[5] == pytest.approx([18.75 / 28, -11.25 / 28], rel=1e-12)
    offline = lira.lira_statistic(scores, inclusion, kind="offline", options=lira.CARLINI)
    assert offline[5, 0] == pytest.approx(stats.norm.cdf(2.5 / math.sqrt(4.25)), rel=1e-12)
    pooled = lira.lira_statistic(scores, inclusion, kind="online",
                                 options=lira.Options(variance="pooled", estimator="median"))
    assert pooled[5, 0] != pytest.approx(online[5, 0])  # another σ, another statistic

    rng = np.random.default_rng(7)
    keep = np.zeros((10, 5), bool)
    keep[:5] = True  # every video IN on the same models: no truncation in their code
    scores = rng.normal(0, 2, (1, 5, 1)) + 0.8 * keep[..., None] + rng.normal(size=(10, 5, 3))
    ours = lira.lira_statistic(scores, keep, kind="online", options=lira.CARLINI)
    for i in range(10):
        others = np.delete(np.arange(10), i)
        np.testing.assert_allclose(ours[i], _carlini_fixed(keep[others], scores[others],
                                                           scores[i]), rtol=1e-10)
    assert lira.CARLINI.label(16) == "Carlini's total σ, median"


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
