r"""UCF-101, official split 1: papers' MaskDP setting, δ = 1e-5, 300 epochs.

    python train.py --config=configs/ucf101_maskdp.py \
        --config.input.data_dir=/data/UCF-101 \
        --config.input.split_dir=/data/ucfTrainTestlist \
        --config.input.mask_dir=/data/UCF-101-masks \
        --config.model.init_from=/ckpt/mvit_v2_s_k400 --workdir=workdir/ucf101_maskdp
    # standard DP-SGD / no privacy on the same videos (masks not needed):
    python train.py --config=configs/ucf101_maskdp.py --config.mode=dp ...
    python train.py --config=configs/ucf101_maskdp.py --config.mode=nonprivate \
        --config.input.augment=True ...
    # another ε: --config.privacy.target_epsilon=0.5

Expected: compare with Table 2 of Schneider et al. 2024b (UCF-101; MaskDP ahead of DP for ε ≤ 0.75).
Requires the videos on disk (nothing is downloaded) and, for maskdp, one mask per video mirroring
the video paths (docs/guides/own_videos.md).
"""

import ml_collections

from maskdp_jax.configs import video_paper


def get_config() -> ml_collections.ConfigDict:
    return video_paper.paper_config(
        dataset="ucf101", num_epochs=300.0, delta=1e-5, split=1
    )
