"""Draw ``public_private.png``: one frame of the embedded dataset, its public mask, and the public
and private views that a MaskDP step trains on.

The views are the library's own (:func:`maskdp_jax.core.tokenizer.make_views` with the default
model's patch stride), so the picture shows exactly what each pass sees: the public pass the
avatar's token cells (no noise), the private pass everything else (clipped and noised). Run from the
repository root: ``python docs/figures/public_private.py``.
"""

import os

import jax.numpy as jnp
import numpy as np

from maskdp_jax.core import tokenizer
from maskdp_jax.data import synthetic
from maskdp_jax.reporting import plots
from maskdp_jax.run import model

GREY = 128.0  # hidden cells drawn mid-grey: the training fill value 0 after normalisation


def main() -> None:
    train, _ = synthetic.make_splits(num_train=8, num_test=8, seed=0)
    clip = train.get_batch(np.array([0]), num_clips=1, seed=None, normalize=False)
    video = jnp.asarray(clip["video"][0, 0], jnp.float32)  # [T, H, W, 3]
    mask = jnp.asarray(clip["mask"][0, 0])                   # [T, H, W], 1 = public
    views = tokenizer.make_views(video, mask, patch_stride=model.patch_stride("mvit_cpu"),
                                 fill_value=GREY)
    t = video.shape[0] // 2
    panels = [
        ("frame", np.asarray(video[t], np.uint8)),
        ("mask (white = public)", np.asarray(mask[t], float)),
        ("public view: no noise", np.asarray(views.public[t], np.uint8)),
        ("private view: DP-SGD", np.asarray(views.private[t], np.uint8)),
    ]
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "public_private.png")
    plots.views_figure(panels, path, title="One training video, as MaskDP splits it")
    print(path)


if __name__ == "__main__":
    main()
