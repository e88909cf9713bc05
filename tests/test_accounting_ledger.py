"""Ledger of heterogeneous histories, checkpoint round trips, and privacy reports."""

import json
import math

import dp_accounting
import pytest

import accounting
from accounting import Ledger, Segment

DELTA = 1e-5


def test_record_merges_equal_steps_only():
    ledger = Ledger()
    for _ in range(5):
        ledger.record(q=0.01, noise_multiplier=1.0)
    ledger.record(q=0.01, noise_multiplier=1.0, steps=10)
    ledger.record(q=0.02, noise_multiplier=1.0, steps=3)
    ledger.record(q=0.01, noise_multiplier=1.0, steps=2)
    assert ledger.steps == 20
    assert ledger.segments == [Segment(0.01, 1.0, 15), Segment(0.02, 1.0, 3), Segment(0.01, 1.0, 2)]


@pytest.mark.parametrize("method", ["pld", "rdp"])
@pytest.mark.parametrize("sampling", ["decoupled", "coupled"])
def test_split_history_equals_single_segment(method, sampling):
    kw = dict(delta=DELTA, method=method, sampling=sampling)
    whole = accounting.epsilon(q=0.01, noise_multiplier=1.1, steps=3000, **kw)
    # Unmerged pieces exercise the composition of several self-composed events.
    pieces = [Segment(0.01, 1.1, 1000), Segment(0.01, 1.1, 1500), Segment(0.01, 1.1, 500)]
    split = accounting.history_epsilon(pieces, **kw)
    assert split == pytest.approx(whole, rel=1e-9 if method == "rdp" else 2e-4)
    # A ledger recorded step by step merges into the single segment: identical ε.
    ledger = Ledger()
    for _ in range(30):
        ledger.record(q=0.01, noise_multiplier=1.1, steps=100)
    assert ledger.epsilon(**kw) == whole


def test_heterogeneous_history_rdp_is_exact_composition():
    ledger = Ledger()
    ledger.record(q=0.01, noise_multiplier=0.9, steps=400)
    ledger.record(q=0.02, noise_multiplier=1.5, steps=700)
    ledger.record(q=0.01, noise_multiplier=3.0, steps=100)
    acc = dp_accounting.rdp.RdpAccountant(
        neighboring_relation=dp_accounting.NeighboringRelation.REPLACE_SPECIAL
    )
    for q, sigma, steps in ledger.segments:
        acc.compose(
            dp_accounting.SelfComposedDpEvent(
                dp_accounting.PoissonSampledDpEvent(q, dp_accounting.GaussianDpEvent(sigma)), steps
            )
        )
    assert ledger.epsilon(delta=DELTA, method="rdp") == pytest.approx(
        acc.get_epsilon(DELTA), rel=1e-12
    )
    pld = ledger.epsilon(delta=DELTA)
    low = accounting.epsilon(q=0.02, noise_multiplier=3.0, steps=1200, delta=DELTA)
    high = accounting.epsilon(q=0.02, noise_multiplier=0.9, steps=1200, delta=DELTA)
    assert low < pld < high


def test_resumed_run_never_reports_less():
    q, sigma, delta = 0.003, 2.0, DELTA
    ledger = Ledger()
    ledger.record(q=q, noise_multiplier=sigma, steps=5000)
    before = ledger.epsilon(delta=delta)
    checkpoint = json.loads(json.dumps(ledger.to_dict(), allow_nan=False))
    resumed = Ledger.from_dict(checkpoint)
    assert resumed == ledger and resumed.epsilon(delta=delta) == before
    resumed.record(q=q, noise_multiplier=2.0 * sigma, steps=300)  # resumed with more noise
    after = resumed.epsilon(delta=delta)
    assert resumed.steps == 5300
    assert after >= before
    assert after >= accounting.epsilon(q=q, noise_multiplier=2.0 * sigma, steps=300, delta=delta)
    # ε along the run never decreases, step by step.
    previous = 0.0
    for _ in range(4):
        resumed.record(q=q, noise_multiplier=2.0 * sigma, steps=25)
        current = resumed.epsilon(delta=delta)
        assert current >= previous
        previous = current


def test_zero_noise_segment_makes_epsilon_infinite():
    ledger = Ledger()
    ledger.record(q=0.01, noise_multiplier=1.0, steps=10)
    ledger.record(q=0.01, noise_multiplier=0.0, steps=1)
    assert ledger.epsilon(delta=DELTA) == math.inf
    assert ledger.epsilon(delta=DELTA, method="rdp") == math.inf
    assert Ledger().epsilon(delta=DELTA) == 0.0


def test_to_dict_is_plain_json():
    ledger = Ledger()
    ledger.record(q=0.25, noise_multiplier=1.5, steps=7)
    d = ledger.to_dict()
    assert d == {"version": 1, "segments": [{"q": 0.25, "noise_multiplier": 1.5, "steps": 7}]}
    assert type(d["segments"][0]["steps"]) is int
    json.dumps(d, allow_nan=False)


@pytest.mark.parametrize(
    "bad",
    [
        {"version": 2, "segments": []},
        {"segments": []},
        {"version": 1},
        {"version": 1, "segments": [{"q": 0.1, "noise_multiplier": 1.0}]},
        {"version": 1, "segments": [{"q": 0.1, "noise_multiplier": 1.0, "steps": 0}]},
        {"version": 1, "segments": [{"q": 1.5, "noise_multiplier": 1.0, "steps": 3}]},
        {"version": 1, "segments": [{"q": 0.1, "noise_multiplier": -1.0, "steps": 3}]},
        {"version": 1, "segments": [{"q": 0.1, "noise_multiplier": 1.0, "steps": 2.5}]},
        [],
    ],
)
def test_from_dict_rejects_corrupt_ledgers(bad):
    with pytest.raises((ValueError, TypeError)):
        Ledger.from_dict(bad)


@pytest.mark.parametrize(
    "kwargs,err",
    [
        (dict(q=0.0, noise_multiplier=1.0), ValueError),
        (dict(q=1.0, noise_multiplier=1.0), ValueError),
        (dict(q=0.1, noise_multiplier=-0.5), ValueError),
        (dict(q=0.1, noise_multiplier=math.inf), ValueError),
        (dict(q=0.1, noise_multiplier=1.0, steps=0), ValueError),
        (dict(q=0.1, noise_multiplier=1.0, steps=1.0), TypeError),
    ],
)
def test_record_rejects_bad_steps(kwargs, err):
    with pytest.raises(err):
        Ledger().record(**kwargs)


def _ledger(q=128 / 40320, sigma=1.0, steps=3000):
    ledger = Ledger()
    ledger.record(q=q, noise_multiplier=sigma, steps=steps)
    return ledger


def test_report_maskdp_special():
    report = accounting.privacy_report(
        mode="maskdp", ledger=_ledger(), delta=1e-6, num_examples=40320
    )
    assert report.adjacency == "special" and report.sampling == "decoupled"
    assert report.epsilon_pld <= report.epsilon_rdp
    assert report.q == pytest.approx(128 / 40320) and report.noise_multiplier == 1.0
    assert report.steps == 3000
    assert "MaskDP" in report.statement and "private tokens" in report.statement
    assert "NOT protected" in report.statement and "label" in report.statement
    assert "decoupled" in report.statement
    d = report.to_dict()
    assert json.loads(json.dumps(d, allow_nan=False))["epsilon_pld"] == report.epsilon_pld
    assert "ε (PLD)" in report.to_markdown()
    with pytest.raises(AttributeError):
        report.epsilon_pld = 0.0


def test_report_replace_has_no_rdp_and_says_why():
    report = accounting.privacy_report(
        mode="maskdp", ledger=_ledger(), delta=1e-6, num_examples=40320, adjacency="replace"
    )
    assert report.epsilon_rdp is None
    assert any("REPLACE_ONE" in note for note in report.notes)
    assert "Definition 2" in report.statement
    special = accounting.privacy_report(
        mode="maskdp", ledger=_ledger(), delta=1e-6, num_examples=40320
    )
    assert report.epsilon_pld > special.epsilon_pld
    assert report.to_dict()["epsilon_rdp"] is None


def test_report_dp_and_coupled():
    report = accounting.privacy_report(
        mode="dp", ledger=_ledger(), delta=1e-6, num_examples=40320, sampling="coupled"
    )
    assert "video" in report.statement and "NOT protected" not in report.statement
    assert "coupled" in report.statement
    decoupled = accounting.privacy_report(
        mode="dp", ledger=_ledger(), delta=1e-6, num_examples=40320
    )
    assert report.epsilon_rdp > decoupled.epsilon_rdp


def test_report_nonprivate_and_zero_noise():
    report = accounting.privacy_report(
        mode="nonprivate", ledger=Ledger(), delta=1e-6, num_examples=100
    )
    assert report.epsilon_pld == math.inf and report.epsilon_rdp == math.inf
    assert "nothing is protected" in report.statement
    d = json.loads(json.dumps(report.to_dict(), allow_nan=False))
    assert d["epsilon_pld"] == "inf" and d["epsilon_rdp"] == "inf"
    noiseless = _ledger(sigma=0.0)
    report = accounting.privacy_report(
        mode="maskdp", ledger=noiseless, delta=1e-6, num_examples=100
    )
    assert report.epsilon_pld == math.inf and any("noise_multiplier = 0" in n for n in report.notes)


def test_report_heterogeneous_has_no_single_q_or_sigma():
    ledger = _ledger()
    ledger.record(q=128 / 40320, noise_multiplier=2.0, steps=10)
    report = accounting.privacy_report(mode="maskdp", ledger=ledger, delta=1e-6, num_examples=40320)
    assert report.q == pytest.approx(128 / 40320) and report.noise_multiplier is None


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(mode="private"),
        dict(delta=1e-2),
        dict(delta=0.0),
        dict(num_examples=0),
        dict(adjacency="swap"),
        dict(sampling="both"),
    ],
)
def test_report_bad_inputs(kwargs):
    args = dict(mode="maskdp", ledger=_ledger(steps=10), delta=1e-6, num_examples=1000)
    args.update(kwargs)
    with pytest.raises(ValueError):
        accounting.privacy_report(**args)
