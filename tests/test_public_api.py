"""The public API (``import maskdp_jax as mdp``) on a model that is not MViT: the image CNN of
``examples/own_model.py`` (T = 1, a 2-D token grid), checked for the invariants the core tests
check on the project's own step: the public gradient does not move when private pixels change,
every clipped contribution is at most C, ``dp`` equals ``maskdp`` with all-private masks, the
pieces compose to the one call, and ``shard_map`` over two devices equals one device."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
import types

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import maskdp_jax as mdp
from maskdp_jax.core import clipping, gradient

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "examples"))
from own_model import SmallCNN, make_data  # noqa: E402

N, P = 16, 8


@pytest.fixture(scope="module")
def setup():
    images, labels, masks = make_data(N)
    model = SmallCNN()
    params = model.init(jax.random.key(0), images[:1])["params"]

    def loss_fn(p, image, label):
        logits = model.apply({"params": p}, image[None])[0]
        return optax.softmax_cross_entropy_with_integer_labels(logits, label)

    batch = mdp.Examples(inputs=jnp.asarray(images[:P]), targets=jnp.asarray(labels[:P]),
                         masks=jnp.asarray(masks[:P]),
                         weights=jnp.asarray([1.0] * (P - 1) + [0.0]))
    return types.SimpleNamespace(model=model, params=params, loss_fn=loss_fn, batch=batch)


def _plan(mode, sigma=1.0, clip=1.0):
    return mdp.PrivacyPlan.calibrate(mode=mode, num_examples=N, batch_size=4, steps=3,
                                     l2_clip_norm=clip, delta=1e-3,
                                     noise_multiplier=None if mode == "nonprivate" else sigma)


def _grad(s, plan, *, public=None, private=None, key=0):
    fn = jax.jit(lambda params, pub, priv, k: gradient.masked_gradient(
        s.loss_fn, params, plan=plan, key=k, public=pub, private=priv,
        tokens=mdp.tokenizer_for(s.model)))
    return fn(s.params, public, private, jax.random.key(key))


def _norm(tree):
    return float(optax.tree.norm(tree))


def test_token_grid_is_read_from_the_model_and_refused_when_absent():
    assert mdp.tokenizer_for(SmallCNN()).patch_stride == (4, 4)
    with pytest.raises(ValueError, match="cannot derive the token grid of Dense"):
        import flax.linen as nn
        mdp.tokenizer_for(nn.Dense(3))
    with pytest.raises(ValueError, match="patch_stride must be 3 positive integers"):
        mdp.Tokenizer(patch_stride=(4, 4, 4, 4))


def test_image_views_hide_whole_cells():
    tokens = mdp.Tokenizer(patch_stride=(2, 2))
    image = jnp.arange(4 * 4 * 1, dtype=jnp.float32).reshape(4, 4, 1)
    mask = jnp.ones((4, 4)).at[0, 0].set(0)  # one private pixel makes its cell private
    views = tokens.views(image, mask)
    assert views.public.shape == image.shape
    fill = tokens.fill(image.shape)
    np.testing.assert_array_equal(views.public[:2, :2], fill[:2, :2])
    assert fill.shape == image.shape and set(np.unique(fill)) == {-1.0, 1.0}
    np.testing.assert_array_equal(views.public[2:], image[2:])
    np.testing.assert_array_equal(views.private[:2, :2], image[:2, :2])
    assert bool(views.has_public) and bool(views.has_private)


def test_public_gradient_is_bit_identical_when_private_pixels_change(setup):
    s = setup
    plan = _plan("maskdp", sigma=0.0)
    # A private pass with only padding rows: the gradient is the public sum / B.
    nothing = s.batch.replace(weights=jnp.zeros(P))
    private = s.batch.masks[..., None] == 0
    changed = s.batch.replace(inputs=jnp.where(private, 50.0 * jnp.sign(s.batch.inputs) + 7.0,
                                                s.batch.inputs))
    a, _ = _grad(s, plan, public=s.batch, private=nothing)
    b, _ = _grad(s, plan, public=changed, private=nothing)
    jax.tree.map(np.testing.assert_array_equal, a, b)
    assert _norm(a) > 0
    # The private pass does see the change, so the equality above is not vacuous.
    c, _ = _grad(s, plan, public=s.batch.replace(weights=jnp.zeros(P)), private=s.batch)
    d, _ = _grad(s, plan, public=s.batch.replace(weights=jnp.zeros(P)), private=changed)
    assert not np.allclose(jax.tree.leaves(c)[0], jax.tree.leaves(d)[0])


def test_a_public_fill_is_used_and_the_public_gradient_still_ignores_private_pixels(setup):
    """``Examples(fills=...)``: the public view's hidden cells show the given public pixels. Its
    gradient changes with the fill (the fill is used) and stays bit for bit the same when the
    private pixels change under it; ``dp`` and a fill of another shape are refused."""
    s = setup
    plan = _plan("maskdp", sigma=0.0)
    nothing = s.batch.replace(weights=jnp.zeros(P))
    rng = np.random.default_rng(1)
    fills = jnp.asarray(rng.normal(size=s.batch.inputs.shape), jnp.float32)
    filled = s.batch.replace(fills=fills)
    private = s.batch.masks[..., None] == 0
    changed = filled.replace(inputs=jnp.where(private, 50.0 * jnp.sign(s.batch.inputs) + 7.0,
                                              s.batch.inputs))
    a, _ = _grad(s, plan, public=filled, private=nothing)
    b, _ = _grad(s, plan, public=changed, private=nothing)
    jax.tree.map(np.testing.assert_array_equal, a, b)
    default, _ = _grad(s, plan, public=s.batch, private=nothing)
    assert not np.allclose(jax.tree.leaves(a)[0], jax.tree.leaves(default)[0])
    with pytest.raises(ValueError, match="fills are what MaskDP's views write"):
        _grad(s, _plan("dp"), private=filled)
    with pytest.raises(ValueError, match="fill shape"):
        _grad(s, plan, public=s.batch.replace(fills=fills[..., :1]), private=nothing)
    with pytest.raises(ValueError, match="disagree on the number of rows"):
        s.batch.replace(fills=fills[:3])


def test_every_clipped_contribution_is_at_most_c(setup):
    s, clip = setup, 0.05
    plan = _plan("dp", sigma=0.0, clip=clip)
    clipped = 0
    for i in range(P - 1):
        one = s.batch.replace(weights=jnp.zeros(P).at[i].set(1.0))
        grad, stats = _grad(s, plan, private=one)
        norm = _norm(grad) * plan.batch_size
        assert norm <= clip * (1 + 1e-5), (i, norm)
        clipped += int(stats.clip.num_clipped)
    assert clipped == P - 1  # C is small: every example's gradient was clipped to exactly C


def test_dp_equals_maskdp_with_all_private_masks(setup):
    s = setup
    all_private = s.batch.replace(masks=jnp.zeros_like(s.batch.masks))
    masked, mstats = _grad(s, _plan("maskdp"), public=all_private, private=all_private, key=3)
    dp, _ = _grad(s, _plan("dp"), private=s.batch, key=3)
    jax.tree.map(lambda x, y: np.testing.assert_allclose(x, y, rtol=1e-6, atol=1e-7), masked, dp)
    assert float(mstats.public_count) == 0.0


def test_the_pieces_compose_to_the_one_call(setup):
    s = setup
    plan = _plan("maskdp", sigma=2.0)
    tokens = mdp.tokenizer_for(s.model)
    key = jax.random.key(5)
    grad, _ = _grad(s, plan, public=s.batch, private=s.batch, key=5)

    def example_loss(p, ex):
        return s.loss_fn(p, *ex)

    pub_in, pub_w = gradient.pass_examples(s.batch, public=True, plan=plan, tokens=tokens)
    priv_in, priv_w = gradient.pass_examples(s.batch, public=False, plan=plan, tokens=tokens)
    public_sum, _ = gradient.public_grad_sum(example_loss, s.params, (pub_in, s.batch.targets),
                                             pub_w)
    private_sum, _ = clipping.clipped_grad_sum(example_loss, s.params, (priv_in, s.batch.targets),
                                               priv_w, l2_clip_norm=plan.l2_clip_norm)
    pieces = gradient.noisy_gradient(public_sum, private_sum, key, plan=plan)
    jax.tree.map(lambda x, y: np.testing.assert_allclose(x, y, rtol=1e-5, atol=1e-6),
                 grad, pieces)
    with pytest.raises(ValueError, match="needs a public pass"):
        gradient.masked_gradient(s.loss_fn, s.params, plan=plan, key=key, private=s.batch,
                            tokens=tokens)
    with pytest.raises(ValueError, match="give Examples\\(masks=...\\)"):
        gradient.masked_gradient(s.loss_fn, s.params, plan=plan, key=key, tokens=tokens,
                            public=s.batch.replace(masks=None), private=s.batch)


SHARDED = r"""
import sys, jax, jax.numpy as jnp, numpy as np, optax
from jax.sharding import PartitionSpec as P
sys.path.insert(0, sys.argv[1])
import maskdp_jax as mdp
from maskdp_jax.core import gradient
from own_model import SmallCNN, make_data
images, labels, masks = make_data(8)
model = SmallCNN(); params = model.init(jax.random.key(0), images[:1])["params"]
loss = lambda p, x, y: optax.softmax_cross_entropy_with_integer_labels(
    model.apply({"params": p}, x[None])[0], y)
plan = mdp.PrivacyPlan.calibrate(mode="maskdp", num_examples=64, batch_size=8, steps=2,
                                 l2_clip_norm=0.1, delta=1e-3, noise_multiplier=1.0)
batch = mdp.Examples(inputs=jnp.asarray(images), targets=jnp.asarray(labels),
                     masks=jnp.asarray(masks), weights=jnp.ones(8))
tokens = mdp.tokenizer_for(model)
def grad(params, pub, priv, key, axis_name=None):
    return gradient.masked_gradient(loss, params, plan=plan, key=key, public=pub, private=priv,
                                    tokens=tokens, axis_name=axis_name)[0]
key = jax.random.key(1)
one = jax.jit(grad)(params, batch, batch, key)
mesh = jax.make_mesh((2,), ("data",))
rows = jax.sharding.NamedSharding(mesh, P("data"))
batch = jax.device_put(batch, rows)
params, key = jax.device_put((params, key), jax.sharding.NamedSharding(mesh, P()))
sharded = jax.jit(jax.shard_map(lambda p, a, b, k: grad(p, a, b, k, "data"), mesh=mesh,
                                in_specs=(P(), P("data"), P("data"), P()), out_specs=P()))
two = sharded(params, batch, batch, key)
print(max(float(jnp.max(jnp.abs(a - b))) for a, b in zip(jax.tree.leaves(one),
                                                         jax.tree.leaves(two))))
"""


@pytest.mark.slow
def test_shard_map_over_two_devices_equals_one_device():
    examples = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                            "examples")
    env = {**os.environ, "XLA_FLAGS": os.environ.get("XLA_FLAGS", "")
           + " --xla_force_host_platform_device_count=2"}
    out = subprocess.run([sys.executable, "-c", SHARDED, examples], env=env, check=True,
                         capture_output=True, text=True).stdout
    assert float(out.strip().splitlines()[-1]) < 1e-6, out


def test_the_lazy_root_names_what_type_checkers_see_and_imports_no_jax():
    """``maskdp_jax`` binds its API on first use: every name of ``__all__`` resolves, the
    ``TYPE_CHECKING`` imports name the same objects from the same modules, and importing the
    package alone does not import JAX."""
    import ast

    tree = ast.parse(open(mdp.__file__).read())
    block = next(n for n in tree.body if isinstance(n, ast.If)
                 and getattr(n.test, "id", "") == "TYPE_CHECKING")
    seen = {alias.name: node.module for node in block.body for alias in node.names}
    assert seen == mdp._EXPORTS
    for name in mdp.__all__:  # each resolves to what its module defines
        assert getattr(mdp, name) is getattr(importlib.import_module(mdp._EXPORTS[name]), name)
    code = "import sys, maskdp_jax; print('jax' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False", out.stdout + out.stderr
