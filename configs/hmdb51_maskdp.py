r"""HMDB-51, official split 1: papers' MaskDP setting, δ = 1e-5, 150 epochs.

    python train.py --config=configs/hmdb51_maskdp.py \
        --config.input.data_dir=/data/hmdb51 \
        --config.input.split_dir=/data/testTrainMulti_7030_splits \
        --config.input.mask_dir=/data/hmdb51-masks \
        --config.model.init_from=/ckpt/mvit_v2_s_k400 --workdir=workdir/hmdb51_maskdp
    # standard DP-SGD / no privacy on the same videos (masks not needed):
    python train.py --config=configs/hmdb51_maskdp.py --config.mode=dp ...
    python train.py --config=configs/hmdb51_maskdp.py --config.mode=nonprivate \
        --config.input.augment=True ...
    # another ε: --config.privacy.target_epsilon=0.5

Expected: compare with seed 003 (HMDB-51 DP-SGD baseline); the MaskDP papers
do not report HMDB-51.
Requires the videos on disk (nothing is downloaded) and, for maskdp, one mask per video mirroring
the video paths (README: "Your own videos and masks").
"""

import ml_collections

from configs import video_paper


def get_config() -> ml_collections.ConfigDict:
    return video_paper.paper_config(
        dataset="hmdb51", num_epochs=150.0, delta=1e-5, split=1
    )
