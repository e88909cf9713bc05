"""Ledger of heterogeneous histories, checkpoint round trips, and privacy reports."""

import json
import math

import dp_accounting
import pytest

from maskdp_jax import accounting
from maskdp_jax.accounting import Ledger, Segment

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
