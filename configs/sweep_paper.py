r"""The ε grid of one of Schneider et al. 2024a's Tables 1-2 on real data: the papers' run at every
ε of the table, DP and MaskDP, plus the non-private run (the ∞ column), one seed.

    # on the anonymised videos (the rows "Anonymized DP / MaskDP"):
    python -m maskdp_jax.sweep --config=configs/sweep_paper.py:hmdb51 --workdir=runs/hmdb51_anon \
        --config.base.input.data_dir=/data/hmdb51_anon \
        --config.base.input.split_dir=/data/testTrainMulti_7030_splits \
        --config.base.input.mask_dir=/data/hmdb51_masks \
        --config.base.model.init_from=/ckpt/mvit_v2_s_k400
    # on the raw videos with the person masks (the rows "Real World DP / MaskDP"):
    python -m maskdp_jax.sweep --config=configs/sweep_paper.py:hmdb51 --workdir=runs/hmdb51_real \
        --config.base.input.data_dir=/data/hmdb51 \
        --config.base.input.mask_dir=/data/hmdb51_persons ...
    python -m maskdp_jax.paper_tables --table=hmdb51 --anonymized=runs/hmdb51_anon \
        --real=runs/hmdb51_real

Tables: ``ntu60``, ``toyota_smarthome`` (Table 1; ε ∈ {0.1, 0.25, 0.5, 0.75, 1, 5}) and
``hmdb51``, ``ucf101`` (Table 2; ε ∈ {0.5, 1, 2, 3, 5, 10}); the base run is the dataset's paper
config (configs/video_paper.py: mvit_v2_s from the converted Kinetics-400 weights, selective
fine-tuning, B = 128, C = 1, SGD 0.01, 20 warm-up epochs, RDP calibration). The grid is
``reporting.paper_tables.TABLES[<table>]``'s, so the sweep and the table cannot disagree. Cost:
``python -m maskdp_jax.paper_tables --table=<table>`` prints the estimated H100-hours. The
walk-through from raw videos: docs/guides/reproduce.md.
"""

import ml_collections

from maskdp_jax.configs import (
    hmdb51_maskdp,
    ntu60_xsub_maskdp,
    sweep_synthetic,
    tsh_cs_maskdp,
    ucf101_maskdp,
)
from maskdp_jax.reporting import paper_tables

DATASETS = {"ntu60": ntu60_xsub_maskdp, "toyota_smarthome": tsh_cs_maskdp,
            "hmdb51": hmdb51_maskdp, "ucf101": ucf101_maskdp}


def get_config(table: str = "hmdb51") -> ml_collections.ConfigDict:
    if table not in DATASETS:
        raise ValueError(f"unknown paper table {table!r}; choose one of {tuple(DATASETS)} "
                         "(--config=configs/sweep_paper.py:<table>).")
    config = sweep_synthetic.get_config()
    config.title = f"Paper ε grid ({paper_tables.TABLES[table].source})"
    config.base = DATASETS[table].get_config()
    config.base.tensorboard = False
    config.sweep.epsilons = paper_tables.TABLES[table].finite_epsilons
    config.sweep.modes = ("nonprivate", "dp", "maskdp")
    config.sweep.seeds = (0,)
    config.sweep.per_class_epsilon = 1.0
    config.config_path = f"configs/sweep_paper.py:{table}"
    return config
