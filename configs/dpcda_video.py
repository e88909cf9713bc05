r"""DP-CDA (Saha et al. 2024) on the embedded video dataset (data/synthetic.py): flattened clips.

    python -m maskdp_jax.release --config=configs/dpcda_video.py --workdir=docs/results/dpcda_video

Each video's centre clip (8 frames of 32×32×3, normalised by the dataset's fixed constants) is
average-pooled 4×4 in space and flattened to 1,536 features: a fixed, data-independent map, so
nothing about it needs budget. 400 training videos (50 per class, 8 classes), 200 test videos.
The same study as configs/dpcda_digits.py, l up to min_class_size − 1 = 49.
"""

import ml_collections

from maskdp_jax.configs import dpcda_digits


def get_config() -> ml_collections.ConfigDict:
    config = dpcda_digits.get_config()
    config.title = "embedded video dataset (flattened, pooled clips)"
    config.data = ml_collections.ConfigDict(dict(
        source="synthetic_video", num_train=400, num_test=200, pool=4, split_seed=0))
    # Feature norms are 18-42 (5th-95th percentile); c = 30 clips the upper half a little.
    config.clip_norm = 30.0
    config.delta = 1e-4  # below 1/N = 1/400
    config.min_class_size = 50  # the generator makes balanced classes (label = index mod 8)
    config.sweep.orders = (1, 2, 4, 8, 16, 32, 49)  # up to min_class_size - 1
    return config
