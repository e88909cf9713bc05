r"""Your own videos and masks: MaskDP on a ``<data_dir>/<class>/<video>`` folder, CPU-sized.

    python train.py --config=configs/folder_maskdp.py \
        --config.input.data_dir=/data/my_videos --config.input.mask_dir=/data/my_masks

Nothing else is required. Masks mirror the video paths (docs/guides/own_videos.md).
The held-out split: ``<data_dir>/train.txt`` and ``test.txt`` if you have them (one
``<class>/<video>`` per line; ``--config.input.split_dir`` if they live elsewhere); with one of
them, the other is every other video of the class folders; with neither, a seeded, stratified
split holds out 20% of each class (``input.test_fraction``, ``input.split_seed``; rule in
data/layouts.py). A split not given by both files is written to ``<workdir>/private/split/`` and
named in the report.

The run is the default run's (``configs/default.py``: MaskDP, ε = 1, δ = 1e-5, the CPU model
``mvit_cpu`` from scratch, 16 epochs) on clips of 8 frames every 2, resized to 32 px and
centre-cropped: minutes on a laptop CPU. For the papers' network and clips (MViTv2-S, 16 x 224^2,
a converted Kinetics-400 checkpoint) start from ``configs/video_paper.py``'s settings instead, e.g.
``configs/ucf101_maskdp.py`` with ``--config.input.dataset=folder``. δ must stay below 1/N and the
batch below N: both are checked before training.
"""

import ml_collections

from maskdp_jax.configs import default


def get_config() -> ml_collections.ConfigDict:
    config = default.get_config()
    config.model.init_from = ""  # the shipped backbone is pretrained on embedded videos only
    config.input = default.video_input(dataset="folder")
    config.hidden_fill = "texture"  # public backgrounds are the embedded dataset's only
    config.input.update(dict(
        clip_frames=8, stride=2, resize_size=32, crop_size=32,  # mvit_cpu's (8, 32, 32) clips
        num_workers=4, prefetch=1, eval_clips=1,
    ))
    return config
