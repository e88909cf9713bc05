"""Tokeniser: token cells, views, and the public-view invariant."""

import jax
import numpy as np
import pytest

from benchmarks import public_view_grad
from maskdp_jax.core import tokenizer

STRIDE = (2, 4, 4)


def _views(video, mask):
    return jax.jit(lambda v, m: tokenizer.make_views(v, m, patch_stride=STRIDE, fill_value=0.0))(
        video, mask
    )


def _cell_mask(rng, cells_shape, stride=STRIDE):
    """A random ``[..., T, H, W]`` pixel mask whose cells are of all three kinds: all public,
    all private, and public but for one private pixel (which makes the whole cell private).

    A per-pixel random mask is not enough: with 32 pixels a cell, one at 0.8 public has an all
    public cell with probability 0.8^32 < 1e-3, and a view test on it holds vacuously."""
    kind = rng.integers(0, 3, cells_shape)  # 0: public, 1: private, 2: one private pixel
    mask = np.kron(kind != 1, np.ones(stride, np.uint8)).astype(np.uint8)
    one = np.zeros(stride, np.uint8)
    one[tuple(rng.integers(0, s) for s in stride)] = 1
    return mask * (1 - np.kron(kind == 2, one)).astype(np.uint8)


def test_cell_is_public_only_if_every_pixel_is_public():
    mask = np.ones((4, 8, 8), np.uint8)
    mask[3, 7, 7] = 0  # one private pixel in the last cell
    cells = np.asarray(tokenizer.public_cells(mask, patch_stride=STRIDE))
    assert cells.shape == (2, 2, 2)
    assert not cells[1, 1, 1]
    assert cells.sum() == 7


@pytest.mark.parametrize("trial", range(5))
def test_public_view_is_bit_identical_when_private_pixels_change(trial):
    rng = np.random.default_rng(trial)
    video = rng.normal(size=(4, 16, 16, 3)).astype(np.float32)
    mask = (rng.random((4, 16, 16)) < 0.7).astype(np.uint8)
    mask |= np.kron(rng.random((2, 4, 4)) < 0.5, np.ones((2, 4, 4), np.uint8)).astype(np.uint8)
    other = video.copy()
    private = mask == 0
    other[private] = rng.normal(size=(private.sum(), 3)) * 100  # arbitrary private content
    a, b = _views(video, mask), _views(other, mask)
    np.testing.assert_array_equal(np.asarray(a.public), np.asarray(b.public))
    assert bool(a.has_public) and bool(a.has_private)
    # The private view did see the change (the test would be vacuous otherwise).
    assert not np.array_equal(np.asarray(a.private), np.asarray(b.private))


def test_a_given_fill_replaces_the_pattern_and_keeps_the_invariant():
    rng = np.random.default_rng(5)
    video = rng.normal(size=(2, 4, 16, 16, 3)).astype(np.float32)
    mask = _cell_mask(rng, (2, 2, 4, 4))
    fill = rng.normal(size=video.shape).astype(np.float32) + 9.0
    tokens = tokenizer.Tokenizer(patch_stride=STRIDE)
    v = tokens.views(video, mask, fill=fill)
    cells = np.asarray(jax.vmap(lambda m: tokenizer.cells_to_pixels(
        tokenizer.public_cells(m, patch_stride=STRIDE), patch_stride=STRIDE))(mask))[..., None]
    assert cells.any() and not cells.all()  # both kinds of cell
    np.testing.assert_array_equal(np.where(cells, np.asarray(v.private), np.asarray(v.public)),
                                  fill)
    other = np.where(mask[..., None] == 0, video * 50 + 3, video).astype(np.float32)
    np.testing.assert_array_equal(np.asarray(tokens.views(other, mask, fill=fill).public),
                                  np.asarray(v.public))
    with pytest.raises(ValueError, match="fill shape"):
        tokens.views(video, mask, fill=fill[:1])


def test_views_partition_the_clip():
    rng = np.random.default_rng(0)
    video = rng.normal(size=(4, 8, 8, 3)).astype(np.float32) + 5.0  # no pixel equals the fill
    mask = _cell_mask(rng, (2, 2, 2))
    v = _views(video, mask)
    public, private = np.asarray(v.public), np.asarray(v.private)
    cells = tokenizer.cells_to_pixels(tokenizer.public_cells(mask, patch_stride=STRIDE),
                                      patch_stride=STRIDE)[..., None]
    fill = tokenizer.hidden_fill(video.shape, patch_stride=STRIDE)
    assert np.asarray(cells).any() and not np.asarray(cells).all()  # both kinds of cell
    np.testing.assert_array_equal(np.where(cells, public, private), video)
    np.testing.assert_array_equal(np.where(cells, private, public), fill)


@pytest.mark.parametrize("seed", range(3))
def test_private_view_hides_every_all_public_cell_and_keeps_every_other(seed):
    """The views split each clip by cells (docs/design.md, "One training step"), checked
    through ``Tokenizer.views`` on a ``[P, K]`` batch against cells counted here: a cell whose
    every pixel is public is the fill in the private view (the private pass does not see the
    public part) and its pixels in the public view; a cell with at least one private pixel,
    even one, keeps all its pixels in the private view and is the fill in the public view."""
    rng = np.random.default_rng(seed)
    tokens = tokenizer.Tokenizer(patch_stride=STRIDE)
    video = rng.normal(size=(2, 3, 4, 8, 8, 3)).astype(np.float32) + 5.0  # never the fill
    mask = _cell_mask(rng, (2, 3, 2, 2, 2))
    v = tokens.views(video, mask)
    fill = np.broadcast_to(tokens.fill(video.shape[-4:]), video.shape)
    st, sh, sw = STRIDE
    # The cells of every clip, ground truth by counting private pixels: [P, K, T', H', W'].
    private_pixels = (mask == 0).reshape(2, 3, 2, st, 2, sh, 2, sw).sum(axis=(3, 5, 7))
    all_public = np.kron(private_pixels == 0, np.ones(STRIDE, bool))[..., None]
    assert {int(n) for n in np.unique(private_pixels)} >= {0, 1, st * sh * sw}  # every kind
    private, public = np.asarray(v.private), np.asarray(v.public)
    np.testing.assert_array_equal(private, np.where(all_public, fill, video))
    np.testing.assert_array_equal(public, np.where(all_public, video, fill))
    np.testing.assert_array_equal(np.asarray(v.has_public), (private_pixels == 0).any((2, 3, 4)))
    np.testing.assert_array_equal(np.asarray(v.has_private), (private_pixels > 0).any((2, 3, 4)))


def test_hidden_fill_is_a_fixed_unit_texture_tiled_per_cell():
    fill = tokenizer.hidden_fill((4, 8, 8, 3), patch_stride=STRIDE, fill_value=0.5)
    cell = fill[:2, :4, :4]
    np.testing.assert_array_equal(fill, np.tile(cell, (2, 2, 2, 1)))
    assert set(np.unique(cell).tolist()) == {-0.5, 1.5}  # 0.5 +- 1
    assert abs(float(cell.mean()) - 0.5) < 0.5  # both signs, roughly balanced
    np.testing.assert_array_equal(  # a pure function of shape and constants
        fill, tokenizer.hidden_fill((4, 8, 8, 3), patch_stride=STRIDE, fill_value=0.5))
    flat = tokenizer.hidden_fill((4, 8, 8, 3), patch_stride=STRIDE, fill_texture=0.0)
    assert not flat.any()  # fill_texture=0: the constant fill_value


def test_indivisible_clip_is_rejected():
    with pytest.raises(ValueError, match="not divisible by the patch stride"):
        tokenizer.public_cells(np.ones((3, 8, 8)), patch_stride=STRIDE)


def test_degenerate_masks_warn_and_say_what_dp_means():
    masks = np.zeros((3, 4, 8, 8), np.uint8)
    masks[0] = 1  # all public
    masks[1, :, :4, :4] = 1  # mixed
    with pytest.warns(UserWarning) as record:
        counts = tokenizer.warn_degenerate_masks(masks, patch_stride=STRIDE, source="toy")
    assert counts == (1, 1)
    text = " ".join(str(w.message) for w in record)
    assert "nothing protected" in text and "ordinary DP-SGD" in text


@pytest.mark.slow
@pytest.mark.parametrize("preset, input_size", [
    # mvit_cpu, mvit_test at twice the width, is bracketed by these two.
    ("mvit_test", None),
    # The papers' network at the smallest clip it takes: its q poolings (blocks 1, 3, 14) halve
    # the 8 x 8 token grid of 32^2 frames three times, block 0's kv stride is (1, 8, 8); 4 frames
    # give 2 token frames. Its overlapping (3, 7, 7) patch kernel is what the CPU presets lack.
    # Compiling it costs over a minute on a 2-core CPU, and the network rarely changes: the
    # release lane (.ci/release) runs it.
    pytest.param("mvit_v2_s", (4, 32, 32), marks=[pytest.mark.heavy, pytest.mark.release])])
def test_public_view_gradient_at_initial_weights_is_of_the_full_videos_order(preset, input_size):
    # Hidden cells enter the model as the tokeniser's fill. A constant fill made every hidden
    # token the patch embedding's bias (0 at initialisation), a zero-variance token whose
    # LayerNorm gradient is ~1/sqrt(eps): public-view gradients 1e4-1e5 times the full video's.
    rows = public_view_grad.measure(preset, num_videos=2, fill="model", views=("full", "public"),
                                    input_size=input_size)
    for row in rows:
        assert 0 < row["public_cells"] < row["cells"] / 2  # the view hides cells
        assert row["full"] / 10 < row["public"] < 10 * row["full"], row
        assert row["min_var_public"] > 1e-2, row  # no patch token near LayerNorm's eps (1e-6)
