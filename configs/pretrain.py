r"""Public pretraining of the default model: ``mvit_cpu`` trained without DP on the public corpus of
the embedded dataset, the counterpart of the papers' Kinetics-400 pretraining.

    python -m maskdp_jax.pretrain --config=configs/pretrain.py --dst=/tmp/backbone

**The corpus** (``input.setting = "pretrain"``, data/synthetic.py "Settings"): avatars moving in
eight directions (the four of the target task and the four diagonals) over rooms of either stripe
orientation, in any of the three shapes. Its labels are not the target task's (directions, not
direction x pose), as Kinetics-400's classes are not NTU's; its videos come from another seed
(``input.data_seed``) and another stream of the generator than the private training set, so no
private video is in it. The whole corpus is public: training on it spends no privacy.

**What ships.** The trained network without its classifier
(maskdp_jax/weights/mvit_cpu_pretrained: ``params.safetensors`` and ``model.json``), so a
fine-tuning run learns a fresh head for its own classes. tests/test_pretrain.py reruns this config
and checks the result equals the shipped file.
"""

import ml_collections

from maskdp_jax.configs import default


def get_config() -> ml_collections.ConfigDict:
    config = default.untuned()
    config.mode = "nonprivate"
    config.input.setting = "pretrain"
    config.model.init_from = ""  # from scratch: this run makes the backbone
    config.input.data_seed = 1000
    config.input.num_train = 2048
    config.num_epochs = 16.0
    config.privacy.randomness = "seeded"  # nothing private: the run is a function of its config
    config.tensorboard = False
    config.checkpoint.every_steps = 0
    return config
