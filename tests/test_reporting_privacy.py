"""The privacy statement of a run (reporting.privacy): ε with what exactly it protects."""

import json
import math

import pytest

from maskdp_jax.accounting import Ledger
from maskdp_jax.core.plan import PrivacyPlan
from maskdp_jax.reporting import privacy


def _ledger(q=128 / 40320, sigma=1.0, steps=3000):
    ledger = Ledger()
    ledger.record(q=q, noise_multiplier=sigma, steps=steps)
    return ledger


def _plan(mode="maskdp", *, num_examples=40320, delta=1e-6, **kwargs):
    """A plan with the ledger's numbers; the report reads q and σ from the ledger."""
    args = dict(mode=mode, num_examples=num_examples, batch_size=min(128, num_examples // 2),
                steps=3000, l2_clip_norm=1.0, delta=delta,
                noise_multiplier=0.0 if mode in ("nonprivate", "public_only") else 1.0)
    args.update(kwargs)
    return PrivacyPlan(**args)


def test_report_maskdp_special():
    report = privacy.privacy_report(plan=_plan(), ledger=_ledger())
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
    report = privacy.privacy_report(plan=_plan(adjacency="replace"), ledger=_ledger())
    assert report.epsilon_rdp is None
    assert any("REPLACE_ONE" in note for note in report.notes)
    assert "Definition 2" in report.statement
    special = privacy.privacy_report(plan=_plan(), ledger=_ledger())
    assert report.epsilon_pld > special.epsilon_pld
    assert report.to_dict()["epsilon_rdp"] is None


def test_report_dp_and_coupled():
    report = privacy.privacy_report(plan=_plan("dp"), ledger=_ledger())
    assert "video" in report.statement and "NOT protected" not in report.statement
    assert "decoupled" in report.statement
    coupled = privacy.privacy_report(plan=_plan(sampling="coupled"), ledger=_ledger())
    assert "coupled" in coupled.statement and coupled.sampling == "coupled"
    decoupled = privacy.privacy_report(plan=_plan(), ledger=_ledger())
    assert coupled.epsilon_rdp > decoupled.epsilon_rdp


def test_report_nonprivate_and_zero_noise():
    report = privacy.privacy_report(plan=_plan("nonprivate", num_examples=100), ledger=Ledger())
    assert report.epsilon_pld == math.inf and report.epsilon_rdp == math.inf
    assert "nothing is protected" in report.statement
    d = json.loads(json.dumps(report.to_dict(), allow_nan=False))
    assert d["epsilon_pld"] == "inf" and d["epsilon_rdp"] == "inf"
    noiseless = _ledger(sigma=0.0)
    report = privacy.privacy_report(plan=_plan(num_examples=100), ledger=noiseless)
    assert report.epsilon_pld == math.inf and any("noise_multiplier = 0" in n for n in report.notes)


def test_report_public_only_is_zero_epsilon_under_masked_adjacency():
    """The public views alone: (0, 0)-MaskDP, whatever the ledger holds, under both relations,
    with what is and is not protected said as for MaskDP."""
    for adjacency in ("special", "replace"):
        report = privacy.privacy_report(plan=_plan("public_only", adjacency=adjacency),
                                        ledger=_ledger(sigma=0.0))
        assert report.epsilon_pld == report.epsilon_rdp == 0.0
        assert report.statement.startswith("(0, 0)-MaskDP under masked adjacency")
        assert "never reads a private pixel" in report.statement
        assert "label and its public tokens are NOT protected" in report.statement
        d = json.loads(json.dumps(report.to_dict(), allow_nan=False))
        assert d["epsilon_pld"] == 0.0 and d["mode"] == "public_only"


def test_report_heterogeneous_has_no_single_q_or_sigma():
    ledger = _ledger()
    ledger.record(q=128 / 40320, noise_multiplier=2.0, steps=10)
    report = privacy.privacy_report(plan=_plan(), ledger=ledger)
    assert report.q == pytest.approx(128 / 40320) and report.noise_multiplier is None


@pytest.mark.parametrize("accountant", ["pld", "rdp"])
def test_report_names_the_accountant_that_calibrated_sigma(accountant):
    calibrated = privacy.privacy_report(
        plan=_plan(accountant=accountant, target_epsilon=2.0), ledger=_ledger())
    assert (calibrated.calibrated_by, calibrated.target_epsilon) == (accountant, 2.0)
    assert f"| σ calibrated by | {accountant.upper()} to ε = 2 |" in calibrated.to_markdown()
    given = privacy.privacy_report(plan=_plan(accountant=accountant), ledger=_ledger())
    assert (given.calibrated_by, given.target_epsilon) == (None, None)
    assert "calibrated by" not in given.to_markdown()


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
    # A report is built from a plan only, and no plan holds these numbers.
    with pytest.raises(ValueError):
        privacy.privacy_report(plan=_plan(**{"num_examples": 1000, **kwargs}),
                               ledger=_ledger(steps=10))


def test_report_refuses_delta_at_least_one_over_n_even_when_nonprivate():
    plan = _plan("nonprivate", num_examples=1000, delta=1e-2)  # the plan does not check δ
    with pytest.raises(ValueError, match="1/N"):
        privacy.privacy_report(plan=plan, ledger=Ledger())


def test_report_refuses_unknown_randomness():
    with pytest.raises(ValueError, match="randomness"):
        privacy.privacy_report(plan=_plan(), ledger=_ledger(steps=10), randomness="public")
