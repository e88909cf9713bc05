"""The coupled-sampling attack (audit/coupled.py) on the tiny test model: the public gradient
gives away the public batch exactly, hence the private batch under coupled sampling (recall 1),
and only a chance overlap (≈ q) under decoupled sampling."""

import numpy as np
import pytest
from conftest import PATCH_STRIDE, random_batch

from maskdp_jax.audit import coupled
from maskdp_jax.core import sampling
from maskdp_jax.core.plan import PrivacyPlan
from maskdp_jax.core.tokenizer import Tokenizer

N, B, STEPS = 40, 10, 12  # q = 1/4


@pytest.fixture(scope="module")
def setup(tiny_model):
    _, params, apply_fn = tiny_model
    data = random_batch(np.random.default_rng(0), size=N, public_fraction=0.9)
    data.pop("weight")
    plan = PrivacyPlan(mode="maskdp", num_examples=N, batch_size=B, steps=STEPS,
                       l2_clip_norm=1.0, noise_multiplier=1.0, delta=1e-5)
    common = dict(apply_fn=apply_fn, plan=plan, tokens=Tokenizer(patch_stride=PATCH_STRIDE))
    grads = coupled.per_example_public_gradients(params, {}, data, **common)
    return params, data, common, grads


def test_more_parameters_than_videos_and_every_video_has_a_public_gradient(setup):
    _, _, _, grads = setup
    assert grads.shape[0] == N and grads.shape[1] > N
    assert np.all(np.linalg.norm(grads, axis=1) > 0)
    assert np.linalg.matrix_rank(grads) == N


def test_the_step_public_gradient_is_the_sum_of_its_members(setup):
    params, data, common, grads = setup
    members = np.array([3, 17, 22, 39])
    g = coupled.step_public_gradient(params, {}, data, members, physical_batch_size=3, **common)
    np.testing.assert_allclose(g, grads[members].sum(axis=0), rtol=1e-4, atol=1e-6)
    np.testing.assert_array_equal(coupled.recover_batch(grads, g), members)


@pytest.mark.parametrize("scheme", ["coupled", "decoupled"])
def test_recall_is_one_coupled_and_about_q_decoupled(setup, scheme):
    params, data, common, _ = setup
    sampler = sampling.PoissonSampler(num_examples=N, expected_batch_size=B, seed=1)
    outcomes = coupled.attack_steps(params, {}, data, sampler, steps=STEPS,
                                    sampling_scheme=scheme, physical_batch_size=8, **common)
    assert all(o.public_exact for o in outcomes)  # the public batch leaks in both schemes
    recall = np.nanmean([o.recall for o in outcomes])
    if scheme == "coupled":
        assert recall == 1.0 and np.nanmean([o.precision for o in outcomes]) == 1.0
    else:
        hits = sum(o.hits for o in outcomes)
        private = sum(o.private for o in outcomes)
        assert abs(hits / private - B / N) < 0.15  # chance overlap of independent draws
