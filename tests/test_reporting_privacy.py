"""The privacy statement of a run (reporting.privacy): ε with what exactly it protects."""

import json
import math

import pytest

from accounting import Ledger
from reporting import privacy


def _ledger(q=128 / 40320, sigma=1.0, steps=3000):
    ledger = Ledger()
    ledger.record(q=q, noise_multiplier=sigma, steps=steps)
    return ledger


def test_report_maskdp_special():
    report = privacy.privacy_report(
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
    report = privacy.privacy_report(
        mode="maskdp", ledger=_ledger(), delta=1e-6, num_examples=40320, adjacency="replace"
    )
    assert report.epsilon_rdp is None
    assert any("REPLACE_ONE" in note for note in report.notes)
    assert "Definition 2" in report.statement
    special = privacy.privacy_report(
        mode="maskdp", ledger=_ledger(), delta=1e-6, num_examples=40320
    )
    assert report.epsilon_pld > special.epsilon_pld
    assert report.to_dict()["epsilon_rdp"] is None


def test_report_dp_and_coupled():
    report = privacy.privacy_report(
        mode="dp", ledger=_ledger(), delta=1e-6, num_examples=40320, sampling="coupled"
    )
    assert "video" in report.statement and "NOT protected" not in report.statement
    assert "coupled" in report.statement
    decoupled = privacy.privacy_report(
        mode="dp", ledger=_ledger(), delta=1e-6, num_examples=40320
    )
    assert report.epsilon_rdp > decoupled.epsilon_rdp


def test_report_nonprivate_and_zero_noise():
    report = privacy.privacy_report(
        mode="nonprivate", ledger=Ledger(), delta=1e-6, num_examples=100
    )
    assert report.epsilon_pld == math.inf and report.epsilon_rdp == math.inf
    assert "nothing is protected" in report.statement
    d = json.loads(json.dumps(report.to_dict(), allow_nan=False))
    assert d["epsilon_pld"] == "inf" and d["epsilon_rdp"] == "inf"
    noiseless = _ledger(sigma=0.0)
    report = privacy.privacy_report(
        mode="maskdp", ledger=noiseless, delta=1e-6, num_examples=100
    )
    assert report.epsilon_pld == math.inf and any("noise_multiplier = 0" in n for n in report.notes)


def test_report_heterogeneous_has_no_single_q_or_sigma():
    ledger = _ledger()
    ledger.record(q=128 / 40320, noise_multiplier=2.0, steps=10)
    report = privacy.privacy_report(mode="maskdp", ledger=ledger, delta=1e-6, num_examples=40320)
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
        privacy.privacy_report(**args)
