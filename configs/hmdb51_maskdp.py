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

Expected (Schneider et al. 2024a, Table 2, HMDB-51, anonymized videos, top-1 %):

    ε              0.5   1     2     3      5     10    ∞
    MaskDP         8.2   7.8   26.2  39.67  51.5  50.9  60.9
    DP (anonym.)   2.4   3.3   4.5   13.5   45.7  57.7  60.9

150 epochs: Schneider et al. 2024a, Sec. 5.3 ("... a 0.01 learning rate over 150 epochs"), which
covers all of its datasets. Luo et al. 2024 reports the HMDB-51 DP-SGD baseline (51.7 at ε = 5, 56.5
at ε = 10). Requires the videos on disk (nothing is downloaded) and, for maskdp, one mask per video
mirroring the video paths (docs/guides/own_videos.md).
"""

import ml_collections

from maskdp_jax.configs import video_paper


def get_config() -> ml_collections.ConfigDict:
    return video_paper.paper_config(
        dataset="hmdb51", num_epochs=150.0, delta=1e-5, split=1
    )
