"""The library's private step (maskdp_jax.core.mechanism) owns its noise, sampler and ledger, and
the API boundary (Examples, masked_gradient) refuses inputs that would break the accountant's
assumptions. Tiny linear models on 4x4 images: seconds on a 2-core CPU."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import maskdp_jax as mdp
from maskdp_jax.core import gradient, noise, sampling

N, B = 200, 8


def plan(mode="maskdp", steps=3, sampling="decoupled", noise_multiplier=1.0, **kw):
    return mdp.PrivacyPlan.calibrate(
        mode=mode, num_examples=N, batch_size=B, steps=steps, l2_clip_norm=1.0, delta=1e-5,
        sampling=sampling, noise_multiplier=None if mode == "nonprivate" else noise_multiplier,
        **kw)


def mechanism(mode="maskdp", **kw):
    return mdp.Mechanism(plan=plan(mode, **kw), randomness=mdp.Randomness(mode="seeded", seed=0))


IMAGES = np.random.default_rng(0).normal(size=(N, 4, 4, 1)).astype(np.float32)
MASKS = np.zeros((N, 4, 4), np.uint8)
MASKS[:, :, :2] = 1
TOKENS = mdp.Tokenizer(patch_stride=(2, 2))


def rows(indices):
    if indices is None:
        return None
    i, w = mdp.padded_indices(indices, multiple_of=8)
    return mdp.Examples(inputs=IMAGES[i], targets=np.zeros(len(i), np.float32), masks=MASKS[i],
                        weights=w)


def constant_loss(w, image, label):
    """A loss whose gradient is 0: the update is the noise alone, divided by B."""
    return 0.0 * jnp.sum(w * image) + label


def linear_loss(w, image, label):
    return jnp.sum(w * image) + label


def run(mech, steps, loss=constant_loss, jit=True):
    """``steps`` steps of the README's loop; returns the gradients and the final state."""
    def step(state, public, private):
        grad, state, _ = mech.gradient(loss, jnp.zeros((4, 4, 1)), state, public=public,
                                       private=private, tokens=TOKENS)
        return grad, state

    step = jax.jit(step) if jit else step
    state, grads = mech.init(), []
    for _ in range(steps):
        drawn = mech.batch(state)
        grad, state = step(state, rows(drawn.public), rows(drawn.private))
        grads.append(np.asarray(grad))
    return grads, state


@pytest.mark.parametrize("mode", ["maskdp", "dp"])
def test_every_step_adds_fresh_noise_from_the_states_key(mode):
    """The same mechanism (one base key) adds different noise at every step, and each step's
    noise is the one of ``step_key(base, t)``: a key not folded with the step (or a fold_in that
    returns its key) fails here."""
    mech = mechanism(mode)
    grads, state = run(mech, 3)
    assert int(state.step) == 3
    assert not np.allclose(grads[0], grads[1]) and not np.allclose(grads[1], grads[2])
    base = mech.randomness.noise_key()
    for t, grad in enumerate(grads):
        expected = noise.gaussian_noise_like(jnp.zeros((4, 4, 1)), noise.step_key(base, t),
                                             noise_multiplier=1.0, l2_clip_norm=1.0) / B
        np.testing.assert_allclose(grad, expected, rtol=1e-6, atol=1e-7)


def test_fold_in_that_returns_its_key_is_caught(monkeypatch):
    """The deliberate breakage of the issue: with ``fold_in`` patched to the identity, two steps
    add the same noise (what the test above refuses)."""
    monkeypatch.setattr(jax.random, "fold_in", lambda key, data: key)
    grads, _ = run(mechanism("dp"), 2, jit=False)
    assert np.allclose(grads[0], grads[1])


@pytest.mark.parametrize("mode", ["maskdp", "dp"])
def test_a_state_whose_noise_was_released_is_refused_the_second_time(mode):
    """Eagerly, a second gradient with the same state (a retry with another batch, a loop that
    does not rebind ``state``) would add the same noise again; it is refused, and the state the
    first call returned goes on. A non-private mechanism adds no noise and is not concerned."""
    mech = mechanism(mode)
    state = mech.init()
    drawn = mech.batch(state)
    kwargs = dict(public=rows(drawn.public), private=rows(drawn.private), tokens=TOKENS)
    _, after, _ = mech.gradient(linear_loss, jnp.zeros((4, 4, 1)), state, **kwargs)
    with pytest.raises(ValueError, match="noise of step 0 was already used"):
        mech.gradient(linear_loss, jnp.zeros((4, 4, 1)), state, **kwargs)
    if mode == "maskdp":  # a variant of the mechanism shares its noise stream's record
        for variant in (mech.with_per_pass(True), mech.with_public_weight(0.5),
                        mech.with_private_mask(None)):
            with pytest.raises(ValueError, match="noise of step 0 was already used"):
                variant.gradient(linear_loss, jnp.zeros((4, 4, 1)), state, **kwargs)
    _, later, _ = mech.gradient(linear_loss, jnp.zeros((4, 4, 1)), after, **kwargs)
    assert int(later.step) == 2
    free = mechanism("nonprivate")
    state = free.init()
    public = rows(free.batch(state).public)
    for _ in range(2):
        free.gradient(linear_loss, jnp.zeros((4, 4, 1)), state, public=public, tokens=TOKENS)


def test_epsilon_stops_at_the_plan_and_a_step_past_it_is_refused():
    mech = mechanism(steps=2)
    grads, state = run(mech, 2)
    ledger = mdp.Ledger()
    mech.plan.record_step(ledger, steps=2)
    assert mech.epsilon(state) == mech.plan.epsilon(ledger) > 0
    with pytest.raises(mdp.PlanExhausted, match="past the plan.*replan"):
        mech.batch(state)
    with pytest.raises(mdp.PlanExhausted, match="past the plan"):
        mech.gradient(constant_loss, jnp.zeros((4, 4, 1)), state, public=rows(np.arange(3)),
                      private=rows(np.arange(3)), tokens=TOKENS)
    # Inside jit the counter is traced: the same budget rule refuses the step when it runs, with
    # the same message (no gradient comes back), while a planned step runs as before.
    step = jax.jit(lambda s, pu, pr: mech.gradient(constant_loss, jnp.zeros((4, 4, 1)), s,
                                                   public=pu, private=pr, tokens=TOKENS))
    with pytest.raises(Exception, match=r"PlanExhausted: step 2 is past the plan.*replan"):
        jax.block_until_ready(step(state, rows(np.arange(3)), rows(np.arange(3))))
    _, first, _ = step(mech.init(), rows(np.arange(3)), rows(np.arange(3)))
    assert int(first.step) == 1


def test_replan_goes_on_with_the_steps_already_charged():
    mech = mechanism(steps=2)
    _, state = run(mech, 2)
    spent = mech.epsilon(state)
    longer = mech.replan(state, plan=plan(steps=3, noise_multiplier=2.0))
    assert longer.first_step == 2 and longer.end_step == 5
    drawn = longer.batch(state)  # step 2 is the new plan's first
    np.testing.assert_array_equal(drawn.private,
                                  mech.sampler.draw(2, stream=sampling.PRIVATE_STREAM))
    _, state, _ = longer.gradient(constant_loss, jnp.zeros((4, 4, 1)), state,
                                  public=rows(drawn.public), private=rows(drawn.private),
                                  tokens=TOKENS)
    ledger = mdp.Ledger()
    mech.plan.record_step(ledger, steps=2)
    longer.plan.record_step(ledger, steps=1)
    assert longer.epsilon(state) == pytest.approx(mech.plan.epsilon(ledger))
    assert longer.epsilon(state) > spent
    with pytest.raises(ValueError, match="mode"):
        mech.replan(state, plan=plan("dp"))


def test_the_batches_follow_the_plans_scheme():
    coupled = mechanism(sampling="coupled").batch(mechanism(sampling="coupled").init())
    np.testing.assert_array_equal(coupled.public, coupled.private)
    decoupled = mechanism().batch(mechanism().init())
    assert not np.array_equal(decoupled.public, decoupled.private)
    assert mechanism("dp").batch(mechanism("dp").init()).public is None
    assert mechanism("nonprivate").batch(mechanism("nonprivate").init()).private is None


def test_epsilon_at_another_delta():
    mech = mechanism()
    _, state = run(mech, 2)
    assert mech.epsilon(state, delta=1e-7) > mech.epsilon(state) > mech.epsilon(state,
                                                                              delta=1e-4)
    with pytest.raises(ValueError, match="1/N"):
        mech.epsilon(state, delta=1.0 / N)
    assert math.isinf(mechanism("nonprivate").epsilon(mechanism("nonprivate").init()))


def test_padded_indices_of_a_missing_pass_says_so():
    drawn = mechanism("dp").batch(mechanism("dp").init())
    with pytest.raises(ValueError, match="no such pass in this mode.*None"):
        mdp.padded_indices(drawn.public, multiple_of=8)


# ---------------------------------------------------------------------------------------------
# The API boundary, by the loader's rules: one row per bad input.
def examples(**change):
    fields = dict(inputs=IMAGES[:4].copy(), targets=np.zeros(4, np.float32),
                  masks=MASKS[:4].copy(), weights=np.ones(4, np.float32))
    fields.update(change)
    return fields


def soft_mask():
    m = MASKS[:4].astype(np.float32)
    m[0, 0, 0] = 0.5
    return m


def mixed_mask():
    m = MASKS[:4].copy()
    m[0, 0, 0] = 255
    return m


@pytest.mark.parametrize("change,message", [
    (dict(weights=np.array([1.0, 2.0, 1.0, 0.0])), r"weights must be 0 .* or 1.*\[2.0\]"),
    (dict(weights=np.array([1.0, -1.0, 1.0, 0.0])), r"weights must be 0 .* or 1.*\[-1.0\]"),
    (dict(weights=np.ones((4, 1))), r"weights must be \[P\]"),
    (dict(masks=soft_mask()), r"masks must be binary.*0.5"),
    (dict(masks=mixed_mask()), r"masks must be binary.*255"),
    (dict(masks=MASKS[:3]), r"disagree on the number of rows"),
], ids=["weight-2", "weight-negative", "weight-shape", "soft-mask", "mixed-mask", "rows"])
def test_examples_refuse_what_the_accountant_does_not_assume(change, message):
    with pytest.raises(ValueError, match=message):
        mdp.Examples(**examples(**change))


@pytest.mark.parametrize("masks", [MASKS[:4] * 255, MASKS[:4].astype(bool),
                                   MASKS[:4].astype(np.float32)], ids=["0-255", "bool", "float"])
def test_examples_take_every_binary_mask_encoding(masks):
    mdp.Examples(**examples(masks=masks, weights=np.array([True, True, False, True])))


def test_a_non_finite_public_pixel_is_dropped_and_counted():
    """NaN or inf in a public pixel: that example leaves the public pass (counted), the update
    stays finite, and equals the update without it."""
    inputs = IMAGES[:4].copy()
    inputs[1, 0, 0, 0] = np.nan  # a public pixel (left half)
    inputs[2, 1, 0, 0] = np.inf
    p = plan("nonprivate")
    grad, stats = gradient.masked_gradient(linear_loss, jnp.zeros((4, 4, 1)), plan=p,
                                           key=jax.random.key(0),
                                           public=mdp.Examples(**examples(inputs=inputs)))
    clean, _ = gradient.masked_gradient(linear_loss, jnp.zeros((4, 4, 1)), plan=p,
                                        key=jax.random.key(0), public=mdp.Examples(**examples(
                                            weights=np.array([1.0, 0.0, 0.0, 1.0]))))
    assert float(stats.public_nonfinite) == 2 and float(stats.public_count) == 2
    np.testing.assert_allclose(np.asarray(grad), np.asarray(clean))


def test_an_empty_pass_adds_the_noise_alone():
    mech = mechanism("dp")
    state = mech.init()
    empty = mdp.Examples(inputs=np.zeros((0, 4, 4, 1), np.float32),
                         targets=np.zeros(0, np.float32), weights=np.zeros(0, np.float32))
    grad, after, stats = mech.gradient(linear_loss, jnp.zeros((4, 4, 1)), state, private=empty)
    expected = noise.gaussian_noise_like(jnp.zeros((4, 4, 1)),
                                         noise.step_key(state.key, 0),
                                         noise_multiplier=1.0, l2_clip_norm=1.0) / B
    np.testing.assert_allclose(np.asarray(grad), np.asarray(expected), rtol=1e-6)
    assert int(after.step) == 1 and float(stats.clip.count) == 0
