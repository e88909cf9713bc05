r"""NTU RGB+D 60, cross-subject: papers' MaskDP setting, δ = 1e-6, 150 epochs.

    python train.py --config=configs/ntu60_xsub_maskdp.py \
        --config.input.data_dir=/data/nturgb+d_rgb \
        --config.input.mask_dir=/data/nturgb+d_masks \
        --config.model.init_from=/ckpt/mvit_v2_s_k400 --workdir=workdir/ntu60_xsub_maskdp
    # standard DP-SGD / no privacy on the same videos (masks not needed):
    python train.py --config=configs/ntu60_xsub_maskdp.py --config.mode=dp ...
    python train.py --config=configs/ntu60_xsub_maskdp.py --config.mode=nonprivate \
        --config.input.augment=True ...
    # another ε: --config.privacy.target_epsilon=0.5

Expected: compare with Table 1 of Schneider et al. 2024b (NTU RGB+D accuracy per ε).
Requires the videos on disk (nothing is downloaded) and, for maskdp, one mask per video mirroring
the video paths (docs/guides/own_videos.md).
"""

import ml_collections

from maskdp_jax.configs import video_paper


def get_config() -> ml_collections.ConfigDict:
    return video_paper.paper_config(
        dataset="ntu60", num_epochs=150.0, delta=1e-6, protocol="xsub"
    )
