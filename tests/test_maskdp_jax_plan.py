"""The privacy plan (maskdp_jax.core.plan): built once, validated once, read by everyone."""

import math

import pytest
from dp_accounting import dp_event
from dp_accounting.rdp import rdp_privacy_accountant

from maskdp_jax import accounting
from maskdp_jax.core.plan import Mode, PrivacyPlan

COMMON = dict(num_examples=1024, batch_size=64, epochs=4, l2_clip_norm=1.0, delta=1e-5)


def test_modes_say_which_passes_run():
    assert [(m.has_public_pass, m.has_private_pass, m.uses_views, m.fixed_epsilon)
            for m in Mode] == [(True, True, True, None), (False, True, False, None),
                               (True, False, True, 0.0), (True, False, False, math.inf)]
    assert Mode("dp") is Mode.DP and Mode.DP == "dp"
    with pytest.raises(ValueError, match=r"mode must be one of \('maskdp', 'dp', 'public_only', "
                                         r"'nonprivate'\); got 'secret'"):
        Mode("secret")


@pytest.mark.parametrize("mode,requested,effective", [
    ("maskdp", "coupled", "coupled"), ("maskdp", "decoupled", "decoupled"),
    ("dp", "coupled", "decoupled"), ("nonprivate", "coupled", "decoupled"),
    ("public_only", "coupled", "decoupled"),
])
def test_the_plan_holds_the_effective_sampling_scheme(mode, requested, effective):
    sigma = None if mode in ("nonprivate", "public_only") else 1.0
    plan = PrivacyPlan.calibrate(mode=mode, sampling=requested, noise_multiplier=sigma, **COMMON)
    assert plan.sampling == effective == Mode(mode).sampling_scheme(requested)


def test_calibrated_plan_reaches_its_target_with_the_smallest_sigma():
    plan = PrivacyPlan.calibrate(mode="maskdp", target_epsilon=2.0, accountant="rdp", **COMMON)
    assert plan.steps == accounting.steps_for_epochs(num_examples=1024, batch_size=64,
                                                     epochs=4) == 64
    assert plan.q == 64 / 1024 and plan.target_epsilon == 2.0
    ledger = accounting.Ledger()
    ledger.record(q=plan.q, noise_multiplier=plan.noise_multiplier, steps=plan.steps)
    assert plan.epsilon(ledger) <= 2.0 < plan.epsilon_after_plan(accounting.Ledger([
        accounting.Segment(q=plan.q, noise_multiplier=plan.noise_multiplier / 1.001,
                           steps=plan.steps)]))
    assert plan.epsilon_after_plan(accounting.Ledger()) == pytest.approx(plan.epsilon(ledger))


def test_dp_event_is_what_the_accountant_composes():
    plan = PrivacyPlan.calibrate(mode="maskdp", noise_multiplier=1.3, **COMMON)
    rdp = rdp_privacy_accountant.RdpAccountant()
    rdp.compose(plan.dp_event())
    ledger = accounting.Ledger()
    for _ in range(plan.steps):
        plan.record_step(ledger)
    assert ledger.steps == plan.steps
    assert rdp.get_epsilon(plan.delta) == pytest.approx(plan.epsilon(ledger, method="rdp"),
                                                        rel=1e-9)
    nonprivate = PrivacyPlan.calibrate(mode="nonprivate", **COMMON)
    assert isinstance(nonprivate.dp_event(), dp_event.NonPrivateDpEvent)
    assert math.isinf(nonprivate.epsilon(ledger))
    public_only = PrivacyPlan.calibrate(mode="public_only", **COMMON)
    assert isinstance(public_only.dp_event(), dp_event.NoOpDpEvent)
    assert public_only.epsilon(ledger) == 0.0 and public_only.noise_multiplier == 0.0
    coupled = PrivacyPlan.calibrate(mode="maskdp", sampling="coupled", noise_multiplier=1.3,
                                    **COMMON)
    with pytest.raises(ValueError, match="coupled sampling has no dp-accounting event"):
        coupled.dp_event()


@pytest.mark.parametrize("kwargs,match", [
    (dict(delta=1 / 1024), r"delta=0\.000976562 is >= 1/N"),
    (dict(noise_multiplier=None), r"exactly one of target_epsilon"),
    (dict(target_epsilon=1.0), r"exactly one of target_epsilon"),
    (dict(l2_clip_norm=0.0), r"l2_clip_norm \(C\) must be finite and > 0"),
    (dict(batch_size=1024), r"q \(sampling rate B/N\) must be < 1"),
    (dict(batch_size=2048), r"batch_size \(expected B\) must be an integer in \[1, N\] with "
                            r"N = 1024.*B = 64 keeps the default run's sampling rate "
                            r"q = B / N = 1/16"),
    (dict(sampling="shared"), r"sampling must be one of \('decoupled', 'coupled'\)"),
    (dict(adjacency="swap"), r"adjacency must be one of"),
    (dict(accountant="prv"), r"accountant must be one of"),
])
def test_bad_plans_are_refused(kwargs, match):
    args = {**COMMON, "mode": "maskdp", "noise_multiplier": 1.0, **kwargs}
    with pytest.raises(ValueError, match=match):
        PrivacyPlan.calibrate(**args)


def test_plans_are_hashable_values_and_nonprivate_has_no_noise():
    a = PrivacyPlan.calibrate(mode="dp", noise_multiplier=1.0, **COMMON)
    assert a == PrivacyPlan.calibrate(mode="dp", noise_multiplier=1.0, **COMMON)
    assert hash(a) == hash(PrivacyPlan.calibrate(mode="dp", noise_multiplier=1.0, **COMMON))
    assert a.to_dict()["mode"] == "dp" and a.to_dict()["q"] == a.q
    assert a.accounting_meta() == {"delta": 1e-5, "adjacency": "special",
                                   "sampling": "decoupled", "mode": "dp"}
    for mode in ("nonprivate", "public_only"):
        with pytest.raises(ValueError, match=f"a {mode} plan .no private pass. has "
                                             "noise_multiplier 0"):
            PrivacyPlan(mode=mode, num_examples=10, batch_size=2, steps=1, l2_clip_norm=1.0,
                        noise_multiplier=1.0, delta=1e-5)


def test_plans_are_built_by_keyword_only():
    # C and σ are both floats: a positional call would swap them without a word.
    with pytest.raises(TypeError):
        PrivacyPlan("maskdp", 1000, 10, 100, 2.0, 1.0, 1e-4)
