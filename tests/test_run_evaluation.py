"""Evaluation on views of the test videos (a diagnostic for models trained with maskdp)."""

import jax
import numpy as np
import pytest
from conftest import CLIP_SHAPE, PATCH_STRIDE, random_batch

from maskdp_jax.core import tokenizer
from maskdp_jax.run import evaluation


class _Clips:
    """A dataset surface as evaluation.predict reads it: fixed views, masks optional."""

    name = "fake"
    pixel_norm = None  # the clips are float: already the model's input

    def __init__(self, batch, with_masks=True):
        self.batch, self.with_masks = batch, with_masks

    def __len__(self):
        return len(self.batch["label"])

    def get_batch(self, indices, *, num_clips=1, seed=None, normalize=True):
        assert seed is None
        out = {"video": self.batch["video"][indices], "label": self.batch["label"][indices]}
        if self.with_masks:
            out["mask"] = self.batch["mask"][indices]
        return out


@pytest.fixture(scope="module")
def setup(tiny_model):
    _, params, apply_fn = tiny_model
    batch = random_batch(np.random.default_rng(0), size=5)
    return params, apply_fn, batch


def _views(batch):
    flat_v = batch["video"].reshape(-1, *CLIP_SHAPE)
    flat_m = batch["mask"].reshape(-1, *CLIP_SHAPE[:3])
    return jax.vmap(lambda v, m: tokenizer.make_views(v, m, patch_stride=PATCH_STRIDE))(
        flat_v, flat_m)


def test_each_view_is_the_tokenisers_view(setup):
    params, apply_fn, batch = setup
    views = _views(batch)
    kw = dict(batch_size=4, tokens=tokenizer.Tokenizer(PATCH_STRIDE))
    ds = _Clips(batch)
    full = evaluation.predict(apply_fn, params, ds, batch_size=4)
    public = evaluation.predict(apply_fn, params, ds, view="public", **kw)
    private = evaluation.predict(apply_fn, params, ds, view="private", **kw)
    both = evaluation.predict(apply_fn, params, ds, view="two_view", **kw)
    np.testing.assert_allclose(full, apply_fn(params, batch["video"][:, 0]), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(public, apply_fn(params, views.public), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(private, apply_fn(params, views.private), rtol=1e-5, atol=1e-6)
    expected = jax.nn.log_softmax(public) + jax.nn.log_softmax(private)
    np.testing.assert_allclose(both, expected, rtol=1e-5, atol=1e-5)
    assert not np.allclose(public, full)


def test_public_view_ignores_private_pixels(setup):
    params, apply_fn, batch = setup
    changed = dict(batch, video=np.where(batch["mask"][..., None] == 0, 5.0, batch["video"]))
    kw = dict(batch_size=4, view="public", tokens=tokenizer.Tokenizer(PATCH_STRIDE))
    np.testing.assert_array_equal(
        evaluation.predict(apply_fn, params, _Clips(batch), **kw),
        evaluation.predict(apply_fn, params, _Clips(changed), **kw),
    )


def test_bad_view_requests_fail_clearly(setup):
    params, apply_fn, batch = setup
    with pytest.raises(ValueError, match="view must be one of"):
        evaluation.predict(apply_fn, params, _Clips(batch), view="avatar")
    with pytest.raises(ValueError, match="patch_stride"):
        evaluation.predict(apply_fn, params, _Clips(batch), view="public")
    with pytest.raises(ValueError, match="needs per-video masks"):
        evaluation.predict(apply_fn, params, _Clips(batch, with_masks=False), view="two_view",
                           tokens=tokenizer.Tokenizer(PATCH_STRIDE))
