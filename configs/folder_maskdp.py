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

The run is the earlier default run's (``default.untuned``: MaskDP, ε = 1, δ = 1e-5, C = 0.1, the
CPU model ``mvit_cpu``, 16 epochs) on clips of 8 frames every 2, resized to 32 px and
centre-cropped: minutes on a laptop CPU. Three defaults differ from the default run's beyond the
tuned strategy and C, each because a user's
folder has what the embedded dataset has not, or lacks what it has
(docs/guides/own_videos.md, "Start to finish"):

* from scratch (``model.init_from = ""``) with full fine-tuning: the shipped backbone is
  pretrained on the embedded videos only, so it does not transfer; pretrain on your own public
  videos (docs/guides/pretraining.md) and pass ``--config.model.init_from``, then the tuning
  study's MaskDP choice (``selective``, lr 3e-3, C = 0.03; docs/results/tuning_maskdp) applies;
* ``hidden_fill = "texture"``: the ``backgrounds`` fill, best in the fill study, draws public
  rooms without people, which only the embedded dataset has;
* B = 64 as the default run: with N videos keep q = B/N = 1/16, ``--config.batch_size=N//16``
  (and ``physical_batch_size``); B > N is refused with that suggestion, B = N too in the
  private modes (q < 1).

For the papers' network and clips (MViTv2-S, 16 x 224^2,
a converted Kinetics-400 checkpoint) start from ``configs/video_paper.py``'s settings instead, e.g.
``configs/ucf101_maskdp.py`` with ``--config.input.dataset=folder``. δ must stay below 1/N and the
batch below N: both are checked before training.
"""

import ml_collections

from maskdp_jax.configs import default


def get_config() -> ml_collections.ConfigDict:
    config = default.untuned()
    config.model.init_from = ""  # the shipped backbone is pretrained on embedded videos only
    config.input = default.video_input(dataset="folder")
    config.hidden_fill = "texture"  # public backgrounds are the embedded dataset's only
    config.input.update(dict(
        clip_frames=8, stride=2, resize_size=32, crop_size=32,  # mvit_cpu's (8, 32, 32) clips
        num_workers=4, prefetch=1, eval_clips=1,
    ))
    return config
