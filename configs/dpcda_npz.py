r"""DP-CDA (Saha et al. 2024) on your own data: an ``.npz`` file, or a folder of ``.npy`` features.

    python -m maskdp_jax.release --config=configs/dpcda_npz.py --workdir=workdir/my_release \
        --config.data.path=my.npz --config.data.num_classes=10 --config.data.scale=255 \
        --config.clip_norm=10 --config.min_class_size=500

``my.npz`` holds ``features`` (``[N, ...]`` numbers, flattened to ``[N, d]``) and ``labels``
(``[N]`` integers in ``[0, K)``); other key names: ``--config.data.features_key``,
``--config.data.labels_key``. A folder instead: ``--config.data.source=folder`` with
``data.path/<class name>/<record>.npy``. Writes ``synthetic.npz`` and ``report.md`` (ε, δ and
how they were computed); with held-out data (``--config.data.test_path``, the same format) the
report also gives the test accuracy of a classifier trained on the release.

**What you must state, publicly** (the command refuses to run while any is unset; none may be
computed from the private data, since the release would then leak it without accounting):

* ``data.num_classes``: K, the label set.
* ``data.scale`` (and ``data.shift``, default 0): features become ``(x − shift) / scale``;
  constants of the format (pixels: 255), never the data's mean or std.
* ``clip_norm``: c, every scaled feature row is clipped to L2 norm c (sensitivity 2c/l).
* ``min_class_size``: a lower bound on every class's size that is public knowledge (the
  sampling rate is l / min_class_size). Too low: still private, just more noise. Above a class's
  true size: the command refuses (accounting/dpcda.py, ``check_class_sizes``, says what that
  refusal reveals and why it is the choice made).

The utility study is off for own data (``sweep.enabled="auto"``): it re-mixes the private data
outside the release's ε. ``--config.sweep.enabled=yes`` (with ``data.test_path``) runs it into
``<workdir>/study/`` anyway, for data you may measure on.
"""

import ml_collections

from maskdp_jax.configs import dpcda_digits


def get_config() -> ml_collections.ConfigDict:
    config = dpcda_digits.get_config()
    config.title = "own data"
    config.data = ml_collections.ConfigDict(dict(
        source="npz",  # or "folder"
        path="",  # the private training data: an .npz file, or a folder of class subfolders
        test_path="",  # optional held-out data in the same format (for the test accuracy only)
        features_key="features",  # npz only
        labels_key="labels",  # npz only
        num_classes=0,  # K: must be set (public)
        shift=0.0,  # features -> (x - shift) / scale, fixed constants
        scale=0.0,  # must be set (> 0)
    ))
    config.clip_norm = 0.0  # must be set (> 0)
    config.min_class_size = 0  # must be set (>= 1): a public lower bound, never measured
    return config
