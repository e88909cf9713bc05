"""The MaskDP step: invariants of the two-view update (on the tiny test model)."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from conftest import PATCH_STRIDE, random_batch

import maskdp_jax as mdp
from maskdp_jax.core import partition, per_pass
from maskdp_jax.core.mechanism import Mechanism
from maskdp_jax.core.plan import Mode, PrivacyPlan
from maskdp_jax.core.randomness import Randomness
from maskdp_jax.core.tokenizer import Tokenizer
from maskdp_jax.core.train_step import (
    LogicalBatchData,
    PixelViews,
    TrainState,
    accumulate,
    make_train_step,
    zeros_accumulator,
)
from maskdp_jax.data import clips
from maskdp_jax.run import model as run_model

SEEDED = Randomness(mode="seeded", seed=42)
# The private pass' two ways to per-example norms (config.compute.per_example): the tests marked
# with ENGINES hold on both.
ENGINES = {"vmap": None, "ghost": run_model.ghost_rules()}


def _cfg(mode="maskdp", sigma=0.0, b=8, c=0.5):
    """The step's collaborators: a mechanism (its plan: mode, C, σ, expected B; seeded noise)
    and the pixel views."""
    plan = PrivacyPlan(mode=mode, num_examples=10**6, batch_size=b, steps=8, l2_clip_norm=c,
                       noise_multiplier=sigma, delta=1e-7)
    return {"mechanism": Mechanism(plan=plan, randomness=SEEDED),
            "views": PixelViews(Tokenizer(patch_stride=PATCH_STRIDE))}


def _state(params, tx, trainable_names=None):
    """The state before step 0 (the noise key is SEEDED's, whatever the plan)."""
    mask = jax.tree_util.tree_map_with_path(
        lambda path, _: trainable_names is None or path[0].key in trainable_names, params
    )
    trainable, frozen = partition.split(params, mask)
    return TrainState.create(trainable=trainable, frozen=frozen, tx=tx,
                             mechanism=_cfg()["mechanism"])


def _copy(state):
    """A copy of ``state`` to step (a step consumes the state it is given)."""
    return jax.tree.map(jnp.copy, state)


def _public(state, batch, apply_fn, cfg):
    acc = zeros_accumulator(state.trainable)
    return jax.jit(lambda a, t, f, b: accumulate(a, t, f, b, public=True, apply_fn=apply_fn,
                                                 **cfg))(acc, state.trainable, state.frozen, batch)


def _private(state, batch, apply_fn, cfg, acc=None):
    acc = zeros_accumulator(state.trainable) if acc is None else acc
    return jax.jit(lambda a, t, f, b: accumulate(a, t, f, b, public=False, apply_fn=apply_fn,
                                                 **cfg))(acc, state.trainable, state.frozen, batch)


def _assert_tree_equal(a, b):
    jax.tree.map(lambda x, y: np.testing.assert_array_equal(np.asarray(x), np.asarray(y)), a, b)


def _leaves_norm(tree):
    return float(optax.tree.norm(tree))


def _with_other_private_pixels(trial: int) -> tuple[dict, dict]:
    """A batch of 6 videos × 2 clips, and the same batch with every private pixel redrawn."""
    rng = np.random.default_rng(trial)
    batch = random_batch(rng, size=6, clips=2)
    other = {k: v.copy() for k, v in batch.items()}
    private = other["mask"] == 0
    other["video"][private] = rng.normal(size=(private.sum(), 3)) * 50
    return batch, other


@pytest.mark.parametrize("trial", range(3))
def test_public_gradient_is_bit_identical_when_private_pixels_change(tiny_model, trial):
    _, params, apply_fn = tiny_model
    batch, other = _with_other_private_pixels(trial)
    state = _state(params, optax.sgd(1.0))
    a = _public(state, batch, apply_fn, _cfg())
    b = _public(state, other, apply_fn, _cfg())
    _assert_tree_equal(a.public, b.public)
    assert _leaves_norm(a.public) > 0
    # The private gradient does see the change (so the test above is not vacuous).
    pa, pb = _private(state, batch, apply_fn, _cfg()), _private(state, other, apply_fn, _cfg())
    assert not np.allclose(pa.private["head"]["kernel"], pb.private["head"]["kernel"])


@pytest.mark.parametrize("trial", range(2))
def test_public_only_step_is_bit_identical_when_private_pixels_change(tiny_model, trial):
    """``public_only`` (ε = 0): the whole update, every metric included, is a function of the
    public pixels, the masks and the labels. Changing every private pixel of the batch (to NaN
    in one clip: a private pixel that entered any sum would make it NaN) changes nothing, while
    the same change does move a ``maskdp`` step (so the comparison can fail)."""
    _, params, apply_fn = tiny_model
    batch, other = _with_other_private_pixels(trial)
    other["video"][0, 1][other["mask"][0, 1] == 0] = np.nan
    tx = optax.sgd(1.0)
    state = _state(params, tx)
    step = make_train_step(apply_fn=apply_fn, tx=tx, **_cfg("public_only", b=6))
    a, metrics_a = step(_copy(state), LogicalBatchData(public=[batch], private=[]))
    b, metrics_b = step(_copy(state), LogicalBatchData(public=[other], private=[]))
    _assert_tree_equal(a.trainable, b.trainable)
    _assert_tree_equal(metrics_a, metrics_b)
    assert _leaves_norm(jax.tree.map(jnp.subtract, a.trainable, state.trainable)) > 0
    assert float(metrics_a["private/batch_size"]) == 0  # no private pass ran
    with pytest.raises(ValueError, match="mode 'public_only' has no private pass"):
        step(_copy(state), LogicalBatchData(public=[batch], private=[batch]))
    maskdp = make_train_step(apply_fn=apply_fn, tx=tx, **_cfg("maskdp", b=6))
    c, _ = maskdp(_copy(state), LogicalBatchData(public=[batch], private=[batch]))
    d, _ = maskdp(_copy(state), LogicalBatchData(public=[other], private=[other]))
    assert not np.allclose(c.trainable["head"]["kernel"], d.trainable["head"]["kernel"],
                           equal_nan=True)
    # Its update is maskdp's public half: the same step with the private batch left empty.
    e, _ = maskdp(_copy(state), LogicalBatchData(public=[batch], private=[]))
    _assert_tree_equal(a.trainable, e.trainable)


def test_public_sum_is_untouched_by_the_private_pass(tiny_model):
    """On the vmap path only: the engine (``ghost_rules``) is a choice inside
    ``clipping.clipped_grad_sum``, which never sees the accumulator; ``accumulate`` adds
    what it returns to the private sum the same way for both."""
    _, params, apply_fn = tiny_model
    rng = np.random.default_rng(0)
    state = _state(params, optax.sgd(1.0))
    acc = _public(state, random_batch(rng, size=4), apply_fn, _cfg())
    for seed in (1, 2):
        after = _private(state, random_batch(np.random.default_rng(seed), size=4), apply_fn,
                         _cfg(), acc=jax.tree.map(jnp.copy, acc))
        _assert_tree_equal(after.public, acc.public)


@pytest.mark.parametrize("engine", sorted(ENGINES))
def test_dp_mode_equals_maskdp_with_all_private_masks(tiny_model, engine):
    _, params, apply_fn = tiny_model
    rng = np.random.default_rng(3)
    private_batch = random_batch(rng, size=8, clips=2)
    private_batch["mask"][:] = 0
    public_batch = random_batch(rng, size=8, clips=2)
    public_batch["mask"][:] = 0
    tx = optax.sgd(0.1, momentum=0.9)
    results = {}
    for mode in ("dp", "maskdp"):
        step = make_train_step(apply_fn=apply_fn, tx=tx, **_cfg(mode, sigma=1.3),
                               ghost_rules=ENGINES[engine])
        batch = LogicalBatchData(public=[public_batch] if mode == "maskdp" else [],
                                 private=[private_batch])
        results[mode], _ = step(_state(params, tx), batch)
    _assert_tree_equal(results["dp"].trainable, results["maskdp"].trainable)
    assert not np.array_equal(results["dp"].trainable["head"]["kernel"], params["head"]["kernel"])


@pytest.mark.parametrize("engine", sorted(ENGINES))
def test_no_private_cells_means_zero_private_gradient_and_vice_versa(tiny_model, engine):
    _, params, apply_fn = tiny_model
    rng = np.random.default_rng(4)
    batch = random_batch(rng, size=4)
    state = _state(params, optax.sgd(1.0))
    all_public = dict(batch, mask=np.ones_like(batch["mask"]))
    private_cfg = {**_cfg(), "ghost_rules": ENGINES[engine]}
    acc = _private(state, all_public, apply_fn, private_cfg)
    assert _leaves_norm(acc.private) == 0.0
    assert float(acc.stats.clip.count) == 0
    all_private = dict(batch, mask=np.zeros_like(batch["mask"]))
    acc = _public(state, all_private, apply_fn, _cfg())
    assert _leaves_norm(acc.public) == 0.0
    # Mixed: only the video with a private cell contributes to the private sum.
    mixed = dict(all_public, mask=all_public["mask"].copy())
    mixed["mask"][2, 0, :2, :4, :4] = 0
    only = jax.tree.map(lambda v: v[2:3], batch | {"mask": mixed["mask"]})
    # Equal up to float rounding: batch 4 and batch 1 compile to different vectorised kernels.
    jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-8),
                 _private(state, mixed, apply_fn, private_cfg).private,
                 _private(state, only, apply_fn, private_cfg).private)


def test_multi_clip_averages_before_clipping(tiny_model):
    _, params, apply_fn = tiny_model
    rng = np.random.default_rng(5)
    batch = random_batch(rng, size=1, clips=2)
    batch["video"][0, 1] *= 30.0  # the two clips have very different gradient norms
    c = 0.05
    cfg = _cfg("dp", c=c)
    state = _state(params, optax.sgd(1.0))
    got = _private(state, batch, apply_fn, cfg).private

    def clip_loss(p, clip):
        logits = apply_fn(p, clip[None])
        return optax.softmax_cross_entropy_with_integer_labels(logits, batch["label"])[0]

    per_clip = [jax.grad(clip_loss)(params, batch["video"][0, k]) for k in range(2)]
    mean = jax.tree.map(lambda a, b: (a + b) / 2, *per_clip)
    clip = lambda g: jax.tree.map(lambda x: x * min(1.0, c / _leaves_norm(g)), g)  # noqa: E731
    expected = clip(mean)
    per_clip_then_mean = jax.tree.map(lambda a, b: (a + b) / 2, clip(per_clip[0]),
                                      clip(per_clip[1]))
    jax.tree.map(lambda g, e: np.testing.assert_allclose(g, e, rtol=1e-4, atol=1e-7),
                 got, expected)
    diff = _leaves_norm(jax.tree.map(jnp.subtract, expected, per_clip_then_mean))
    assert diff > 1e-3 * _leaves_norm(expected)  # the two orders really differ here


def test_noise_is_added_once_per_logical_batch_and_divided_by_expected_batch_size(tiny_model):
    _, params, apply_fn = tiny_model
    rng = np.random.default_rng(6)
    sigma, c, b = 2.0, 0.5, 16
    padding = random_batch(rng, size=4)
    padding["weight"][:] = 0.0  # contributes nothing: the update is pure noise
    tx = optax.sgd(1.0)
    step = make_train_step(apply_fn=apply_fn, tx=tx, **_cfg("dp", sigma=sigma, b=b, c=c))
    updates = []
    for num_physical in (1, 3):
        state = _state(params, tx)
        new, _ = step(_copy(state),
                      LogicalBatchData(public=[], private=[padding] * num_physical))
        updates.append(jax.tree.map(jnp.subtract, new.trainable, state.trainable))
    _assert_tree_equal(updates[0], updates[1])
    values = np.concatenate([np.ravel(v) for v in jax.tree.leaves(updates[0])])
    # -lr * N(0, (sigma C)^2) / B; few hundred parameters, so a loose but meaningful bound.
    assert abs(values.std() / (sigma * c / b) - 1) < 0.15


def test_consecutive_steps_from_one_base_key_add_independent_noise(tiny_model):
    """The step index enters the noise key: two consecutive steps of one run, given the same
    base key (as train.py gives every step), add different, uncorrelated noise. The accountant
    composes independent Gaussian draws; a noise vector repeated at the next step could be
    cancelled by whoever sees both updates. With padding only (no learning signal) each update
    is the noise alone, -lr * N(0, σ²C²) / B; the step is pure, so step 0 again adds its own
    noise again (the difference comes from the step index, nothing else)."""
    _, params, apply_fn = tiny_model
    padding = random_batch(np.random.default_rng(6), size=2)
    padding["weight"][:] = 0.0
    tx = optax.sgd(1.0)
    step = make_train_step(apply_fn=apply_fn, tx=tx, **_cfg("dp", sigma=1.0, b=4, c=0.5))
    batch = LogicalBatchData(public=[], private=[padding])

    def noise_of(state):
        new, _ = step(_copy(state), batch)
        diff = jax.tree.map(jnp.subtract, new.trainable, state.trainable)
        return new, np.concatenate([np.ravel(v) for v in jax.tree.leaves(diff)])

    first = _state(params, tx)
    second, noise_0 = noise_of(first)
    _, noise_1 = noise_of(second)
    assert int(second.step) == 1
    np.testing.assert_array_equal(noise_of(first)[1], noise_0)
    assert noise_0.std() > 0 and noise_1.std() > 0
    # A few hundred independent coordinates: |correlation| ~ 0.05; the same draw gives 1.
    assert abs(np.corrcoef(noise_0, noise_1)[0, 1]) < 0.3


def test_update_divides_by_expected_batch_size_not_sampled_size(tiny_model):
    _, params, apply_fn = tiny_model
    rng = np.random.default_rng(7)
    batch = random_batch(rng, size=4)
    batch["weight"][3] = 0.0  # 3 real examples
    tx = optax.sgd(1.0)
    grads = {}
    for b in (4, 12):
        step = make_train_step(apply_fn=apply_fn, tx=tx, **_cfg("maskdp", b=b))
        state = _state(params, tx)
        new, _ = step(_copy(state), LogicalBatchData(public=[batch], private=[batch]))
        grads[b] = jax.tree.map(lambda o, n: o - n, state.trainable, new.trainable)
    state = _state(params, tx)
    cfg = _cfg("maskdp")
    acc = _private(state, batch, apply_fn, cfg, acc=_public(state, batch, apply_fn, cfg))
    total = jax.tree.map(jnp.add, acc.public, acc.private)
    for b, g in grads.items():
        jax.tree.map(lambda x, t, b=b: np.testing.assert_allclose(x, t / b, rtol=1e-5,
                                                                  atol=1e-7), g, total)


def test_frozen_parameters_never_change_and_gradients_hold_only_trainable_leaves(tiny_model):
    _, params, apply_fn = tiny_model
    rng = np.random.default_rng(8)
    tx = optax.sgd(0.5)
    state = _state(params, tx, trainable_names={"head"})
    assert set(state.trainable) == {"head"} and "head" not in state.frozen
    acc = _private(state, random_batch(rng, size=4), apply_fn, _cfg())
    assert jax.tree.structure(acc.private) == jax.tree.structure(state.trainable)
    step = make_train_step(apply_fn=apply_fn, tx=tx, **_cfg(sigma=1.0))
    batch = random_batch(rng, size=4)
    new, _ = step(_copy(state), LogicalBatchData(public=[batch], private=[batch]))
    _assert_tree_equal(new.frozen, state.frozen)
    assert not np.array_equal(new.trainable["head"]["kernel"], state.trainable["head"]["kernel"])
    _assert_tree_equal(new.params["patch_embed"], params["patch_embed"])


def test_mode_without_a_pass_refuses_its_batches(tiny_model):
    _, params, apply_fn = tiny_model
    batch = random_batch(np.random.default_rng(9), size=2)
    tx = optax.sgd(1.0)
    step = make_train_step(apply_fn=apply_fn, tx=tx, **_cfg("nonprivate"))
    with pytest.raises(ValueError, match="no private pass"):
        step(_state(params, tx), LogicalBatchData(public=[batch], private=[batch]))
    with pytest.raises(ValueError, match="mode must be one of"):
        _cfg("secret")


def test_microbatched_private_pass_gives_the_same_accumulator(tiny_model):
    """config.compute.microbatch_size reaches the clipper through the step: same clipped sum.
    The ghost path in micro-batches against the vmap path on the whole batch: one comparison
    covers the micro-batch scan around the ghost engine (the vmap engine's scan is the same code,
    tested in tests/test_maskdp_jax_clipping.py; whole batches of both engines agree in
    tests/test_maskdp_jax_ghost.py)."""
    _, params, apply_fn = tiny_model
    batch = random_batch(np.random.default_rng(5), size=6, clips=2)
    state = _state(params, optax.sgd(1.0))
    cfg = _cfg(c=0.05)
    whole = _private(state, batch, apply_fn, cfg)
    chunked = _private(state, batch, apply_fn,
                       {**cfg, "microbatch_size": 2, "ghost_rules": ENGINES["ghost"]})
    jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-7),
                 chunked, whole)
    assert int(whole.stats.clip.num_clipped) > 0
    with pytest.raises(ValueError, match="microbatch_size must be > 0"):
        make_train_step(apply_fn=apply_fn, tx=optax.sgd(1.0), **_cfg(), microbatch_size=0)


@pytest.mark.parametrize("mode", ["maskdp", "nonprivate"])
def test_public_pass_ignores_non_finite_padding_rows(tiny_model, mode):
    # A padding row (weight 0) may hold anything: inf/NaN pixels must not make the public sum,
    # its gradient or the update NaN (0 * inf), and the result equals a zero padding row.
    _, params, apply_fn = tiny_model
    rng = np.random.default_rng(9)
    batch = random_batch(rng, size=4, clips=2)
    batch["weight"][-1] = 0.0
    batch["mask"][-1] = 1  # in maskdp the public view of the row shows its pixels
    bad = dict(batch, video=batch["video"].copy())
    bad["video"][-1, 0] = np.inf
    bad["video"][-1, 1] = np.nan
    clean = dict(batch, video=batch["video"].copy())
    clean["video"][-1] = 0.0
    state = _state(params, optax.sgd(1.0))
    got, want = (_public(state, b, apply_fn, _cfg(mode)) for b in (bad, clean))
    assert np.isfinite(float(got.stats.public_loss_sum)) and _leaves_norm(got.public) > 0
    _assert_tree_equal(got.public, want.public)
    _assert_tree_equal(got.stats.public_loss_sum, want.stats.public_loss_sum)
    step = make_train_step(apply_fn=apply_fn, tx=optax.sgd(0.1), **_cfg(mode))
    new_state, _ = step(_copy(state), LogicalBatchData(public=[bad], private=[]))
    assert all(np.isfinite(x).all() for x in jax.tree.leaves(new_state.trainable))


def _uint8_batch(rng, *, size, clips=2):
    batch = random_batch(rng, size=size, clips=clips)
    batch["video"] = rng.integers(0, 256, batch["video"].shape, dtype=np.uint8)
    return batch


def test_uint8_pixels_are_normalised_inside_the_step_as_on_the_host(tiny_model):
    """The loader ships uint8 (a quarter of the bytes) and the step normalises on the device:
    the update equals that of the same batch normalised on the host, bit for bit, in both
    passes; without a pixel_norm the step refuses uint8 instead of feeding 0..255 to the model."""
    _, params, apply_fn = tiny_model
    norm = clips.PixelNorm((0.45,), (0.225,))
    raw = _uint8_batch(np.random.default_rng(11), size=4)
    host = dict(raw, video=norm(raw["video"]))
    tx = optax.sgd(0.1, momentum=0.9)
    state = _state(params, tx)
    batches = [LogicalBatchData(public=[b], private=[b]) for b in (raw, host)]
    step_raw = make_train_step(apply_fn=apply_fn, tx=tx, **_cfg(sigma=1.0), pixel_norm=norm)
    step_host = make_train_step(apply_fn=apply_fn, tx=tx, **_cfg(sigma=1.0))
    (got, got_m), (want, want_m) = (step_raw(_copy(state), batches[0]),
                                    step_host(_copy(state), batches[1]))
    _assert_tree_equal(got.trainable, want.trainable)
    _assert_tree_equal(got_m, want_m)
    assert float(got_m["private/batch_size"]) > 0 and float(got_m["public/batch_size"]) > 0
    with pytest.raises(TypeError, match="uint8 pixels but the step has no pixel_norm"):
        step_host(_copy(state), batches[0])


@pytest.mark.parametrize("public_fill", [False, True])
def test_public_gradient_of_uint8_pixels_is_bit_identical_when_private_pixels_change(
        tiny_model, public_fill):
    """The invariant above, through the on-device normalisation: it is per pixel, so it moves
    no private pixel into the public view. With a per-clip public fill (run.views.PublicFill,
    hidden_fill=backgrounds) the fill enters the public view, private pixels still do not."""
    _, params, apply_fn = tiny_model
    rng = np.random.default_rng(12)
    batch = _uint8_batch(rng, size=6)
    if public_fill:
        batch["fill"] = rng.integers(0, 256, batch["video"].shape, dtype=np.uint8)
    other = dict(batch, video=batch["video"].copy())
    private = other["mask"] == 0
    other["video"][private] = rng.integers(0, 256, (private.sum(), 3), dtype=np.uint8)
    cfg = dict(_cfg(), pixel_norm=clips.PixelNorm((0.45,), (0.225,)))
    state = _state(params, optax.sgd(1.0))
    a, b = (_public(state, x, apply_fn, cfg) for x in (batch, other))
    _assert_tree_equal(a.public, b.public)
    assert _leaves_norm(a.public) > 0
    pa, pb = (_private(state, x, apply_fn, cfg) for x in (batch, other))
    assert not np.allclose(pa.private["head"]["kernel"], pb.private["head"]["kernel"])
    if public_fill:  # the fill is used: the equality is not that of a pass ignoring hidden cells
        refilled = dict(batch, fill=rng.integers(0, 256, batch["video"].shape, dtype=np.uint8))
        c = _public(state, refilled, apply_fn, cfg)
        assert not np.allclose(a.public["head"]["kernel"], c.public["head"]["kernel"])


@pytest.mark.parametrize("mode,noise_kind", [
    ("maskdp", "independent"), ("dp", "independent"), ("public_only", "independent"),
    ("nonprivate", "independent"), ("maskdp", "banded"), ("dp", "banded"),
    ("maskdp", "private_head"), ("maskdp", "public_fill")])
def test_the_step_is_the_library_call_in_every_mode(tiny_model, mode, noise_kind):
    """``make_train_step`` (what train.py runs) and ``Mechanism.gradient`` (the library's call)
    are one private step: two logical steps of each, from one mechanism state, the trainer's
    with each pass split into two physical batches and the library's with each pass in one
    batch, give the same updates (σ > 0: the noise too; banded: its state too), to float
    rounding (sums over other batch shapes). ``public_fill``: per-example fills of the hidden
    cells, the trainer's ``fill`` batches and the library's ``Examples(fills=...)``."""
    from maskdp_jax.core import train_step

    _, params, apply_fn = tiny_model
    rng = np.random.default_rng(11)
    cfg = _cfg(mode, sigma=0.7 if Mode(mode).is_private else 0.0, b=4, c=0.5)
    if noise_kind == "banded":
        plan = PrivacyPlan(mode=mode, num_examples=1000, batch_size=4, steps=4, l2_clip_norm=0.5,
                           noise_multiplier=0.7, delta=1e-5, noise="banded", bands=2)
        cfg["mechanism"] = Mechanism(plan=plan, randomness=SEEDED)
    tx = optax.sgd(1.0)
    state = _state(params, tx, trainable_names=("norm", "head"))
    if noise_kind == "private_head":  # the private pass over the head, the public over all
        cfg["mechanism"] = Mechanism(plan=cfg["mechanism"].plan, randomness=SEEDED,
                                     private_mask=_head_only(state.trainable))
    mech = cfg["mechanism"]
    plan = mech.plan
    state = state.replace(privacy=mech.init(state.trainable))
    library_params, library_state = _copy((state.trainable, state.privacy))
    step = make_train_step(apply_fn=apply_fn, tx=tx, **cfg)

    def loss(trainable, clip_batch, label):  # one video: [K, T, H, W, C], label []
        return train_step.one_video_loss(apply_fn, state.frozen, trainable, (clip_batch, label))

    def examples(b):
        return mdp.Examples(inputs=jnp.asarray(b["video"]), targets=jnp.asarray(b["label"]),
                            masks=jnp.asarray(b["mask"]), weights=jnp.asarray(b["weight"]),
                            fills=None if "fill" not in b else jnp.asarray(b["fill"]))

    gradient_step = jax.jit(lambda t, s, pu, pr: mech.gradient(loss, t, s, public=pu, private=pr,
                                                               tokens=cfg["views"].tokens))
    for _ in range(2):
        public, private = random_batch(rng, size=4), random_batch(rng, size=4)
        private["weight"][-1] = 0.0  # a padding row
        if noise_kind == "public_fill":
            for b in (public, private):
                b["fill"] = rng.normal(size=b["video"].shape).astype(np.float32)
        halves = [lambda b: {k: v[:2] for k, v in b.items()},
                  lambda b: {k: v[2:] for k, v in b.items()}]
        state, _ = step(state, LogicalBatchData(
            public=[h(public) for h in halves] if plan.mode.has_public_pass else [],
            private=[h(private) for h in halves] if plan.mode.has_private_pass else []))
        grad, library_state, _ = gradient_step(
            library_params, library_state,
            examples(public) if plan.mode.has_public_pass else None,
            examples(private) if plan.mode.has_private_pass else None)
        library_params = jax.tree.map(lambda p, g: p - g, library_params, grad)
    jax.tree.map(lambda x, y: np.testing.assert_allclose(x, y, rtol=1e-5, atol=1e-6),
                 state.trainable, library_params)
    assert int(state.privacy.step) == int(library_state.step) == 2
    jax.tree.map(lambda x, y: np.testing.assert_allclose(x, y, rtol=1e-5, atol=1e-6),
                 state.privacy.noise, library_state.noise)
    assert _leaves_norm(jax.tree.map(jnp.subtract, state.trainable,
                                     _state(params, tx, ("norm", "head")).trainable)) > 0


def _head_only(trainable):
    """The mask of the head's leaves in ``trainable``."""
    return jax.tree_util.tree_map_with_path(lambda path, _: path[0].key == "head", trainable)


@pytest.mark.parametrize("trial", range(2))
def test_a_private_pass_over_the_head_leaves_the_rest_to_the_public_views(tiny_model, trial):
    """With ``private_mask`` on the head, the private pass trains the head alone: every other
    trainable parameter's update is the public pass's, bit for bit whatever the private pixels
    and with σ > 0 (no private gradient and no noise reaches it), while the head's update moves
    with the private pixels; the private sum is the head's clipped per-example sum (norm ≤ C
    over the head)."""
    _, params, apply_fn = tiny_model
    tx = optax.sgd(1.0)
    base = _state(params, tx, trainable_names=("norm", "head"))
    cfg = _cfg("maskdp", sigma=2.0, b=4, c=0.05)
    mech = Mechanism(plan=cfg["mechanism"].plan, randomness=SEEDED,
                     private_mask=_head_only(base.trainable))
    cfg["mechanism"] = mech
    step = make_train_step(apply_fn=apply_fn, tx=tx, **cfg)
    batch, other = _with_other_private_pixels(trial)
    updates = []
    for private in (batch, other):
        state = _copy(base)
        new, _ = step(state, LogicalBatchData(public=[batch], private=[private]))
        updates.append(jax.tree.map(jnp.subtract, new.trainable, base.trainable))
    public_only = _cfg("public_only", b=4)
    reference, _ = make_train_step(apply_fn=apply_fn, tx=tx, **public_only)(
        _copy(base), LogicalBatchData(public=[batch], private=[]))
    reference = jax.tree.map(jnp.subtract, reference.trainable, base.trainable)
    for update in updates:
        _assert_tree_equal({k: v for k, v in update.items() if k != "head"},
                           {k: v for k, v in reference.items() if k != "head"})
    assert not np.allclose(updates[0]["head"]["kernel"], updates[1]["head"]["kernel"])
    assert not np.allclose(updates[0]["head"]["kernel"], reference["head"]["kernel"])
    # The private sum is the clipped sum of a run whose only trainable parameter is the head
    # (the rest frozen): each video's head gradient clipped to C over the head, nothing else.
    acc = _private(base, batch, apply_fn, cfg, acc=mech.zeros(base.trainable))
    assert set(acc.private) == {"head"}
    head_only = _state(params, tx, trainable_names=("head",))
    reference_acc = _private(head_only, batch, apply_fn, _cfg("maskdp", sigma=2.0, b=4, c=0.05))
    jax.tree.map(lambda x, y: np.testing.assert_allclose(x, y, rtol=1e-5, atol=1e-7),
                 acc.private, reference_acc.private)
    assert int(acc.stats.clip.num_clipped) == int(acc.stats.clip.count) > 0  # C binds here


def test_the_public_weight_scales_the_public_sum_alone(tiny_model):
    """With ``public_weight`` λ the step is (λ · public sum + clipped private sum + noise) / B:
    its update is the unweighted step's plus (λ − 1) times public-only's update on the same
    public views, so the private sum and its noise (σC, once) are what they were, whatever λ.
    Outside MaskDP, and at λ ≤ 0, it is refused."""
    _, params, apply_fn = tiny_model
    tx = optax.sgd(1.0)
    base = _state(params, tx, trainable_names=("norm", "head"))
    batch, _ = _with_other_private_pixels(0)
    data = LogicalBatchData(public=[batch], private=[batch])
    updates = {}
    for weight in (1.0, 0.1):
        cfg = _cfg("maskdp", sigma=2.0, b=4, c=0.05)
        cfg["mechanism"] = cfg["mechanism"].with_public_weight(weight)
        new, _ = make_train_step(apply_fn=apply_fn, tx=tx, **cfg)(_copy(base), data)
        updates[weight] = jax.tree.map(jnp.subtract, new.trainable, base.trainable)
    public, _ = make_train_step(apply_fn=apply_fn, tx=tx, **_cfg("public_only", b=4))(
        _copy(base), LogicalBatchData(public=[batch], private=[]))
    public = jax.tree.map(jnp.subtract, public.trainable, base.trainable)
    expected = jax.tree.map(lambda u, p: u + (0.1 - 1.0) * p, updates[1.0], public)
    jax.tree.map(lambda x, y: np.testing.assert_allclose(x, y, rtol=1e-5, atol=1e-6),
                 updates[0.1], expected)
    assert not np.allclose(updates[0.1]["head"]["kernel"], updates[1.0]["head"]["kernel"])
    plan = _cfg("maskdp")["mechanism"].plan
    with pytest.raises(ValueError, match="finite number > 0"):
        Mechanism(plan=plan, randomness=SEEDED, public_weight=0.0)
    with pytest.raises(ValueError, match="has not both"):
        Mechanism(plan=_cfg("dp")["mechanism"].plan, randomness=SEEDED, public_weight=0.5)


def _update(apply_fn, base, tx, mechanism, data):
    """The change of the trainable parameters in one step of ``mechanism`` under ``tx``."""
    views = _cfg()["views"]
    new, _ = make_train_step(apply_fn=apply_fn, tx=tx, mechanism=mechanism, views=views)(
        _copy(base), data)
    return jax.tree.map(jnp.subtract, new.trainable, base.trainable)


def test_an_optimiser_per_pass_gets_the_one_sum_release_in_two_parts(tiny_model):
    """With ``per_pass`` the mechanism hands over ``λ · public sum / B`` and ``(clipped private
    sum + noise) / B`` apart: under SGD (linear) the two updates add up to the one-sum step's
    (the same noise, σC once, the same B); the public part alone is public-only's update (no
    noise and no private gradient in it); the private part alone does not depend on the
    public pass's weight."""
    _, params, apply_fn = tiny_model
    base = _state(params, optax.sgd(1.0), trainable_names=("norm", "head"))
    batch, _ = _with_other_private_pixels(0)
    data = LogicalBatchData(public=[batch], private=[batch])
    one = _cfg("maskdp", sigma=2.0, b=4, c=0.05)["mechanism"]
    split = one.with_per_pass(True)

    def per_pass_update(public_lr, private_lr, mechanism=split):
        tx = per_pass.per_pass(optax.sgd(public_lr), optax.sgd(private_lr))
        state = base.replace(opt_state=tx.init(base.trainable))
        return _update(apply_fn, state, tx, mechanism, data)

    summed = _update(apply_fn, base, optax.sgd(1.0), one, data)
    jax.tree.map(lambda x, y: np.testing.assert_allclose(x, y, rtol=1e-5, atol=1e-7),
                 per_pass_update(1.0, 1.0), summed)
    public_only = _update(apply_fn, base, optax.sgd(1.0), _cfg("public_only", b=4)["mechanism"],
                          LogicalBatchData(public=[batch], private=[]))
    jax.tree.map(lambda x, y: np.testing.assert_allclose(x, y, rtol=1e-5, atol=1e-7),
                 per_pass_update(1.0, 0.0), public_only)
    private = per_pass_update(0.0, 1.0)
    assert np.abs(private["head"]["kernel"]).max() > 0
    jax.tree.map(np.testing.assert_array_equal, private,
                 per_pass_update(0.0, 1.0, split.with_public_weight(0.01)))


@pytest.mark.parametrize("kind", ["independent", "banded", "private_head"])
def test_two_steps_per_pass_are_the_one_sum_steps(tiny_model, kind):
    """Two steps with an SGD per pass (both at rate 1) end where two one-sum SGD steps end, the
    banded noise's state included: the same noise, once per step, over the same B. With the
    private pass over the head alone, the private optimiser moves nothing else."""
    _, params, apply_fn = tiny_model
    rng = np.random.default_rng(5)
    plan = _cfg("maskdp", sigma=0.7, b=4, c=0.5)["mechanism"].plan
    if kind == "banded":
        plan = PrivacyPlan(mode="maskdp", num_examples=1000, batch_size=4, steps=4,
                           l2_clip_norm=0.5, noise_multiplier=0.7, delta=1e-5, noise="banded",
                           bands=2)
    base = _state(params, optax.sgd(1.0), trainable_names=("norm", "head"))
    one = Mechanism(plan=plan, randomness=SEEDED, private_mask=(
        _head_only(base.trainable) if kind == "private_head" else None))
    batches = [LogicalBatchData(public=[random_batch(rng, size=4)],
                                private=[random_batch(rng, size=4)]) for _ in range(2)]

    def two_steps(mechanism, tx):
        state = _copy(base).replace(opt_state=tx.init(base.trainable),
                                    privacy=mechanism.init(base.trainable))
        step = make_train_step(apply_fn=apply_fn, tx=tx, mechanism=mechanism,
                               views=_cfg()["views"])
        for b in batches:
            state, _ = step(state, b)
        return state

    summed = two_steps(one, optax.sgd(1.0))
    split = two_steps(one.with_per_pass(True),
                      per_pass.per_pass(optax.sgd(1.0), optax.sgd(1.0)))
    close = functools.partial(np.testing.assert_allclose, rtol=1e-5, atol=1e-6)
    jax.tree.map(close, split.trainable, summed.trainable)
    jax.tree.map(close, split.privacy.noise, summed.privacy.noise)
    assert int(split.step) == int(summed.step) == 2
    if kind == "private_head":
        private = two_steps(one.with_per_pass(True),
                            per_pass.per_pass(optax.sgd(0.0), optax.adam(0.1)))
        moved = jax.tree_util.tree_map_with_path(
            lambda path, new, old: (path[0].key, bool(np.any(np.asarray(new) != old))),
            private.trainable, base.trainable)
        assert {key for key, changed in jax.tree.leaves(
            moved, is_leaf=lambda x: isinstance(x, tuple)) if changed} == {"head"}


def test_an_optimiser_per_pass_pairs_with_a_per_pass_mechanism_in_maskdp_alone(tiny_model):
    _, params, apply_fn = tiny_model
    views = _cfg()["views"]
    mechanism = _cfg("maskdp")["mechanism"]
    two = per_pass.per_pass(optax.adam(1e-3), optax.adam(1e-2))
    with pytest.raises(ValueError, match="a one-sum mechanism with a per-pass optimiser"):
        make_train_step(apply_fn=apply_fn, tx=two, mechanism=mechanism, views=views)
    with pytest.raises(ValueError, match="a per-pass mechanism with one optimiser"):
        make_train_step(apply_fn=apply_fn, tx=optax.adam(1e-3),
                        mechanism=mechanism.with_per_pass(True), views=views)
    with pytest.raises(TypeError, match="PassGradients"):
        two.update({"w": jnp.ones(2)}, two.init({"w": jnp.ones(2)}))
    for mode in ("dp", "public_only", "nonprivate"):
        with pytest.raises(ValueError, match="has not both passes"):
            Mechanism(plan=_cfg(mode)["mechanism"].plan, randomness=SEEDED, per_pass=True)
    # A re-planned mechanism keeps handing the parts over apart.
    plan = mechanism.plan
    again = mechanism.with_per_pass(True).replan(mechanism.init(params), plan=plan)
    assert again.per_pass


def test_an_optimiser_per_pass_gives_the_private_pass_its_own_scale():
    """Under one Adam on the sum, where the public gradient is many times the private one the
    step is the public gradient's alone: the private pass moves nothing there. With an Adam
    per pass the update is the public pass's Adam step plus the private pass's, each of the
    learning rate's size, whatever the other's scale."""
    params = {"w": jnp.zeros(3)}
    grads = per_pass.PassGradients(public={"w": jnp.array([1e3, 0.0, -1e3])},
                                   private={"w": jnp.array([1e-3, 1e-3, 1e-3])})

    def step(tx, g):
        return np.asarray(tx.update(g, tx.init(params), params)[0]["w"])

    public_alone = step(optax.adam(0.1), grads.public)
    one = step(optax.adam(0.1), grads.total())
    np.testing.assert_allclose(one[[0, 2]], public_alone[[0, 2]], atol=1e-6)
    two = step(per_pass.per_pass(optax.adam(0.1), optax.adam(0.1)), grads)
    np.testing.assert_allclose(two, [-0.2, -0.1, 0.0], atol=1e-4)


def test_a_private_pass_over_part_of_the_parameters_is_maskdp_s_alone():
    plan = _cfg("dp")["mechanism"].plan
    with pytest.raises(ValueError, match="MaskDP's.*fine-tuning strategy"):
        Mechanism(plan=plan, randomness=SEEDED, private_mask={"head": {"kernel": True}})
    maskdp = _cfg("maskdp")["mechanism"].plan
    with pytest.raises(ValueError, match="selects no parameter"):
        Mechanism(plan=maskdp, randomness=SEEDED, private_mask={"head": {"kernel": False}})
    banded = PrivacyPlan(mode="maskdp", num_examples=1000, batch_size=4, steps=4,
                         l2_clip_norm=0.5, noise_multiplier=0.7, delta=1e-5, noise="banded",
                         bands=2)
    with pytest.raises(ValueError, match="needs independent noise"):
        Mechanism(plan=banded, randomness=SEEDED, private_mask={"head": {"kernel": True}})


def test_a_step_consumes_its_state(tiny_model):
    """A state can be stepped once: the finalisation takes its buffers (donation), so a loop
    that forgets to rebind ``state``, or retries a step with another batch, fails instead of
    releasing a second update with the same noise (the difference of the two would carry
    none). A copy can be stepped on purpose."""
    _, params, apply_fn = tiny_model
    tx = optax.sgd(1.0)
    step = make_train_step(apply_fn=apply_fn, tx=tx, **_cfg("dp", sigma=1.0, b=4))
    batch = random_batch(np.random.default_rng(13), size=4)
    state = _state(params, tx)
    kept = _copy(state)
    new, _ = step(state, LogicalBatchData(public=[], private=[batch]))
    assert int(new.step) == 1
    with pytest.raises((RuntimeError, ValueError), match="deleted|donated"):
        step(state, LogicalBatchData(public=[], private=[batch]))
    again, _ = step(kept, LogicalBatchData(public=[], private=[batch]))
    _assert_tree_equal(again.trainable, new.trainable)


def _nbytes(tree) -> int:
    return sum(x.nbytes for x in jax.tree.leaves(tree))


def test_the_step_s_programs_write_over_the_state_they_replace(tiny_model):
    """Donation, by XLA's own memory analysis of the compiled programs: the finalisation aliases
    the parameters, the optimiser state and banded noise's past noise (output written over
    input: one copy of the state in memory, not two), each pass its sums. Without donation the
    same program aliases nothing (the control)."""
    _, params, apply_fn = tiny_model
    plan = PrivacyPlan(mode="maskdp", num_examples=1000, batch_size=4, steps=4, l2_clip_norm=0.5,
                       noise_multiplier=0.7, delta=1e-5, noise="banded", bands=2)
    mech = Mechanism(plan=plan, randomness=SEEDED)
    tx = optax.adam(1e-3)
    cfg = dict(_cfg("maskdp"), mechanism=mech)
    step = make_train_step(apply_fn=apply_fn, tx=tx, **cfg)
    state = _state(params, tx, trainable_names=("norm", "head"))
    state = state.replace(privacy=mech.init(state.trainable))
    acc = step.zeros(state.trainable)
    replaced = _nbytes((state.trainable, state.opt_state, state.privacy.noise))
    assert _nbytes(state.privacy.noise.buffers) == 2 * _nbytes(state.trainable)  # bands

    def aliased(program, *args):
        return program.lower(*args).compile().memory_analysis().alias_size_in_bytes

    assert aliased(step.finalize, state.replace(frozen=None), acc) >= replaced
    # each program is named for profiles: jit_public_pass, jit_private_pass, jit_finalize_step
    assert "@jit_finalize_step" in step.finalize.lower(state.replace(frozen=None), acc).as_text()
    batch = random_batch(np.random.default_rng(0), size=4)
    for program in (step.public, step.private):
        assert aliased(program, acc, state.trainable, state.frozen, batch) >= _nbytes(acc)
    undonated = jax.jit(lambda s, a: mdp.core.train_step.finalize(s, a, tx=tx, mechanism=mech))
    assert aliased(undonated, state.replace(frozen=None), acc) == 0
