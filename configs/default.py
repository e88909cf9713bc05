r"""Default run: MaskDP on the embedded synthetic dataset with the tiny MViTv2, ε = 1, δ = 1e-5,
fine-tuned from public pretraining, as the papers do.

    python train.py                                   # this config, mode maskdp
    python train.py --config=configs/default.py:dp    # standard DP-SGD on the whole video
    python train.py --config=configs/default.py:public_only  # the public views alone (ε = 0)
    python train.py --config=configs/default.py:nonprivate   # plain SGD, no privacy
    python train.py --config.mode=dp                  # DP-SGD at MaskDP's settings
    python train.py --config=configs/default.py:context   # the second setting (below)
    python train.py --config=configs/default.py --config.privacy.target_epsilon=2

**The papers' regime and protocol** (docs/guides/training.md). The data are the embedded
dataset's ``person`` setting (data/synthetic.py, "Settings"): the label is the avatar's action
(the public part), the room is context (the private part). The model, ``mvit_cpu``, starts from
the shipped backbone pretrained without DP on a public corpus with other labels
(``model.init_from = "shipped:mvit_cpu_pretrained"``, configs/pretrain.py) and is fine-tuned with a
fresh head, then tested on full videos. Each mode's fine-tuning strategy, learning rate, C and
epochs won its tuning on a validation part of the training split (``input.eval_split =
"validation"``, configs/sweep_tuning.py), never on the test split; docs/results/default is the
headline at these settings (docs/guides/training.md says what was compared).

Settings (``--config=configs/default.py:<setting>``, or ``:<mode>`` for ``person`` in that mode):

* ``person`` (default): above;
* ``context``: the same protocol on the ``context`` data, whose label is half in the private room
  (where MaskDP's limits show);
* ``context_scratch``: the earlier releases' default run (``context`` data, trained from scratch),
  the base of the studies committed with it.

The run report (JSON + Markdown) and the trained model are written to --workdir (default
./workdir/<mode>).
"""

import ml_collections
from ml_collections import config_dict

from maskdp_jax.data import preprocess

SETTINGS = ("person", "context", "context_scratch")
MODES = ("maskdp", "dp", "public_only", "nonprivate")


def get_config(arg: str = "person") -> ml_collections.ConfigDict:
    """The default run. ``arg`` is a setting (``person``: MaskDP) or a mode (the ``person``
    setting in that mode). On ``person`` every mode runs at the settings that won its tuning on
    the validation split (configs/sweep_tuning.py, ``tuned``: fine-tuning strategy, learning rate,
    C, epochs), the ones the headline compares; ``context`` and ``context_scratch`` were not
    tuned and keep :func:`untuned`'s."""
    setting, mode = ("person", arg) if arg in MODES else (arg, "maskdp")
    config = untuned(setting)
    config.mode = mode
    if setting == "person":
        # Imported here: configs/sweep_tuning.py builds its grids on this module.
        from maskdp_jax.configs import sweep_tuning
        config.update_from_flattened_dict(dict(sweep_tuning.tuned(mode)))
    return config


def untuned(setting: str = "person") -> ml_collections.ConfigDict:
    """The earlier default's settings (full fine-tuning, Adam 3e-3, C = 0.1, 16 epochs, MaskDP):
    where the tuning started, and the base of the studies committed before it, which must keep
    rebuilding from their configs."""
    if setting not in SETTINGS:
        raise ValueError(f"unknown setting or mode {setting!r}; choose a setting of {SETTINGS} "
                         f"or a mode of {MODES} (--config=configs/default.py:<setting|mode>).")
    config = ml_collections.ConfigDict()
    config.seed = 0
    config.mode = "maskdp"              # maskdp | dp | public_only | nonprivate
    config.sampling = "decoupled"       # decoupled (default) | coupled (paper's Algorithm 1)

    config.input = synthetic_input()
    config.model = model()
    if setting == "context_scratch":
        config.input.setting = "context"
    else:
        config.input.setting = setting
        config.model.init_from = PRETRAINED

    config.batch_size = 64              # expected logical batch size B (Poisson, q = B / N)
    config.physical_batch_size = 80     # static per-call batch: B + 2 std of the Poisson size
    config.num_epochs = 16.0            # steps = ceil(num_epochs * ceil(N / B))
    # Hidden cells of each view: a fixed ±1 texture around this value (0 = mid-grey);
    # maskdp_jax.core.tokenizer.hidden_fill says why not a constant.
    config.fill_value = 0.0
    # What MaskDP's training views write into hidden cells: backgrounds (public rooms drawn per
    # clip, the embedded dataset only; run/views.py PublicFill) | texture (the fixed pattern
    # above) | constant (fill_value alone). Chosen on the validation split:
    # docs/results/fill_validation.
    config.hidden_fill = "backgrounds" if setting != "context_scratch" else "texture"
    # What a nonprivate run trains and is tested on: full | public (avatar only) | background
    # (the inpainted room without the avatar) | private (the avatar's cells filled); the context
    # ablation of Schneider et al. 2024a Table 3 (run/views.py).
    config.view = "full"
    # Feature masking (Gu & Chen 2024 Alg. 1): the report.json of `python -m maskdp_jax.audit
    # --config=configs/audit_feature_masking.py`; its per-subject masks hide cells of every
    # training and test clip (run/views.py; the embedded dataset needs input.num_subjects).
    config.feature_masks = ""
    config.feature_mask_version = "optimized"  # optimized (the MILP's) | random (the control)
    config.feature_mask_views = "private"  # private: extra hidden cells of the private view | both

    config.privacy = ml_collections.ConfigDict()
    config.privacy.target_epsilon = 1.0
    config.privacy.delta = 1e-5
    # σ given directly (then no ε target is enforced); None: calibrate σ to target_epsilon.
    config.privacy.noise_multiplier = config_dict.placeholder(float)
    # C sets how loud the private sum (and its noise σC) is next to the unclipped public gradient.
    # Measured on the context data from scratch (16 epochs, ε = 1): with C = 1 the noise drowns
    # the public gradient (public loss stays at ln 8 for 200+ steps); with C = 0.1 the public
    # motion is learned by step ~100; not re-tuned for the person setting. Under Adam, dp mode
    # is invariant to C when every example is clipped.
    config.privacy.l2_clip_norm = 0.1
    # maskdp: the parameters the private pass trains, by a fine-tuning strategy's name (linear:
    # the head; norms; selective), a part of model.finetune's; the public pass trains them all.
    # C and the noise then cover that part alone. "": every trainable parameter.
    config.privacy.private_finetune = ""
    # maskdp: λ, the public pass's weight in the step, (λ · public sum + clipped private sum +
    # noise) / B: how loud the private pass is next to the unclipped public gradient. Not a
    # privacy parameter (ε, C and σ are unchanged; core/mechanism.py). 1: the papers' sum.
    config.privacy.public_weight = 1.0
    config.privacy.accountant = "pld"        # pld | rdp, used for calibration
    config.privacy.adjacency = "special"     # special | replace
    # The private pass's noise: "independent" (DP-SGD) or "banded" (BandMF: noise correlated over
    # `bands` steps, the private batch drawn cyclically from `bands` secret groups; σ is
    # calibrated for it, docs/guides/bandmf.md).
    config.privacy.noise = "independent"
    config.privacy.bands = 1
    # Where the DP noise and the Poisson batches come from. "secret": a fresh secret per run, kept
    # only in the checkpoints (keep them private). "seeded": from config.seed, which the report
    # publishes, so anyone can recompute the noise: tests and reproducibility experiments only.
    config.privacy.randomness = "secret"

    # How the steps are computed: keys that cannot change the guarantee (the same update, to float
    # rounding; jax_privacy calls these performance flags). Everything that can change ε lives in
    # `privacy`, `sampling`, `batch_size`, `num_epochs` and `input`.
    config.compute = compute()

    config.optimizer = ml_collections.ConfigDict()
    # Adam (post-processing of the noised sum, so privacy is unchanged): from scratch, SGD with
    # momentum diverged or stalled on this transformer; Adam 3e-3 learns in the CPU budget.
    config.optimizer.name = "adam"         # sgd | adam
    config.optimizer.learning_rate = 3e-3
    config.optimizer.momentum = 0.9
    config.optimizer.warmup_epochs = 1.0
    config.optimizer.weight_decay = 0.0
    # maskdp: None, one optimiser on the summed gradient (the papers' step); a number, each pass
    # its own optimiser state (the same name and schedule), the private pass at this peak
    # learning rate: the unclipped public gradient then no longer sets the private update's
    # scale. Post-processing of the noised sum (core/per_pass.py): ε is unchanged.
    config.optimizer.private_learning_rate = config_dict.placeholder(float)

    # Frozen-prefix feature cache (data/feature_cache.py, docs/guides/feature_cache.md): with a
    # strategy that freezes the first blocks (selective, linear, norms, adapters; not full), the
    # tokens entering the first trainable block are computed once for G clips per video and the
    # steps run only the trainable suffix. Clips then come from that fixed grid of G positions.
    config.feature_cache = ml_collections.ConfigDict()
    config.feature_cache.enabled = False
    config.feature_cache.dir = ""            # default <workdir>/private/feature_cache (private)
    config.feature_cache.clips_per_video = 4  # G, cached clip positions per video (>= K)
    config.feature_cache.dtype = "float32"   # float32 | bfloat16 on disk (steps in float32)
    config.feature_cache.batch_size = 0      # videos per prefix call; 0 = physical_batch_size

    config.log_every_steps = 10
    # orbax checkpoints in <workdir>/private/checkpoints (private: in secret mode they hold the
    # noise secret); a rerun with the same --workdir resumes.
    config.checkpoint = ml_collections.ConfigDict()
    config.checkpoint.every_steps = 50  # 0 = only on SIGTERM (and at step 0 in secret mode)
    config.checkpoint.keep = 2          # most recent checkpoints kept
    config.tensorboard = True           # TensorBoard scalars in <workdir>/tb, JSONL always
    config.log_private_metrics = False  # private-view loss etc. are NOT DP; opt-in only
    # Persistent XLA cache (per user): a second run with the same shapes skips most compilation
    # (32 s -> 3 s for this run). "" turns it off. Compiled programs hold no data and no secret:
    # the noise key and the batches are arguments.
    config.compilation_cache_dir = "~/.cache/maskdp_jax/xla"
    return config


# ----------------------------------------------------------------------------------------------
# Sections: every key of a training config and its default, defined once. The run layer reads
# them as plain attributes; a key set on the command line that a section lacks is refused.
# ----------------------------------------------------------------------------------------------
#: The default run's backbone (maskdp_jax.weights): mvit_cpu pretrained on the public corpus.
PRETRAINED = "shipped:mvit_cpu_pretrained"


def model() -> ml_collections.ConfigDict:
    """``config.model``: what :func:`maskdp_jax.run.model.build` builds (also the audits' model)."""
    return ml_collections.ConfigDict(dict(
        name="mvit_cpu",
        finetune="full",          # full | selective | norms | linear | adapters
        num_last_blocks=2,        # k for `selective`
        init_from="",             # orbax checkpoint: `python -m maskdp_jax.convert`
        # A frozen-backbone strategy (every finetune but `full`) on a pretrained preset
        # (models.PRETRAINED) without init_from is refused unless this is True.
        allow_random_init=False,
    ))


def compute() -> ml_collections.ConfigDict:
    """``config.compute``: how the step is computed; none of these keys can change ε."""
    return ml_collections.ConfigDict(dict(
        # auto | float32 | bfloat16 (mixed precision: products in bf16; parameters, norms,
        # softmax, residual stream, logits and gradients, so clipping and noise, in float32).
        # auto: bfloat16 on a GPU or TPU, float32 on the CPU (run.model.compute_dtype_name).
        dtype="auto",
        # The attention kernel: auto | einsum | xla | cudnn (models.mvit.attention_implementation;
        # auto: cuDNN's fused attention on a GPU in bfloat16, else einsum). The same function.
        attention="auto",
        # Per-example gradients computed this many at a time (0 = the whole physical batch at
        # once); must divide physical_batch_size. Bounds memory for full fine-tuning.
        microbatch_size=0,
        # How each example's gradient norm is computed: vmap (per-example gradients) | ghost (from
        # the activations and output gradients of one backward, no per-example gradient) | auto
        # (ghost for full fine-tuning of the papers' models, where it measured faster; vmap
        # elsewhere: run/model.py AUTO_GHOST).
        per_example="auto",
    ))


def clip_keys() -> dict:
    """Keys of ``config.input`` that every dataset has: how clips are drawn and evaluated."""
    return dict(
        clips_per_video=1,        # K (multi-clip: per-video loss = mean over K clips)
        # Where the K training clips start: uniform (independent offsets) | consecutive (K of
        # the video's consecutive, non-overlapping clips, Luo et al. 2024 Sec. 3.2; data/clips.py).
        clip_sampling="uniform",
        eval_clips=1,             # temporal evaluation views (logits averaged)
        prefetch=0,               # logical steps prepared ahead on the host (0 = none)
        # test | validation: evaluate on a seeded, class-stratified part of the training split
        # held out from training (choose hyper-parameters there; the test split stays unread)
        eval_split="test",
        validation_fraction=0.2,
        validation_seed=0,
    )


def synthetic_input() -> ml_collections.ConfigDict:
    """``config.input`` of the embedded synthetic dataset (:mod:`maskdp_jax.data.synthetic`)."""
    return ml_collections.ConfigDict(dict(
        dataset="synthetic",
        num_train=1024,
        num_test=512,
        frames=16,                # frames per generated video
        clip_frames=8,            # T, frames per clip
        size=32,
        num_subjects=0,           # > 0: subjects with an emblem on the background
        # person: the avatar's action is the label, the room adds context | context: the label
        # is (avatar motion, room stripes) | share: a share of the label in the room alone |
        # pretrain: the public pretraining corpus (data/synthetic.py, "Settings")
        setting="person",
        # share only (required there): the fraction of videos whose label only the private room
        # shows (data/synthetic.py; configs/sweep_where_it_pays.py)
        private_share=config_dict.placeholder(float),
        data_seed=0,              # the generator's seed (public)
        # constant: the label shows in every frame | segment: only during cue_frames frames of
        # each video, so clips of a video differ (data/synthetic.py; configs/sweep_multiclip.py)
        cue="constant",
        cue_frames=4,
        **clip_keys(),
    ))


def video_input(*, dataset: str, split: int = 1, protocol: str = "") -> ml_collections.ConfigDict:
    """``config.input`` of real videos: a folder layout (``ucf101``, ``hmdb51``, ``ntu60``,
    ``toyota_smarthome``, ``folder``; :mod:`maskdp_jax.data.layouts`) or ``tfds_ucf101``.

    Clip geometry and normalisation are those of torchvision's Kinetics-400 MViTv2-S weights
    (16 frames every 4, short side 256, centre crop 224); keep ``mean/std/resize_size/crop_size``
    equal to whatever preprocessing the converted checkpoint expects.
    """
    return ml_collections.ConfigDict(dict(
        dataset=dataset,
        data_dir="",            # video root (required)
        # Inpainted background videos in data_dir's layout (`python -m maskdp_jax.anonymize
        # --background_dir`), read instead of data_dir by --config.view=background (Table 3).
        background_dir="",
        split_dir="",           # split files; default: data_dir
        mask_dir="",            # masks mirroring the video paths; "" = no masks (dp/nonprivate)
        split=split,            # official split (UCF-101, HMDB-51)
        protocol=protocol,      # NTU: xsub | xview; Smarthome: cs | cv1 | cv2
        tfds_config="ucf101_1_256",  # tfds_ucf101: the builder config
        test_subset="test",
        test_fraction=0.2,      # folder without split files: seeded stratified held-out split
        split_seed=0,           # ... its public seed (data/layouts.py)
        clip_frames=16,         # T
        stride=4,               # s: frames between clip frames (span 61)
        resize_size=256,        # short side before cropping
        crop_size=224,
        short_videos="pad",     # pad (repeat last frame) | error
        # torchvision's MViT_V2_S_Weights.KINETICS400_V1 normalisation (mean 0.45, std 0.225; not
        # VideoClassification's defaults), [0, 1] units; tests/test_data_preprocess.py checks it.
        mean=preprocess.K400_MEAN,
        std=preprocess.K400_STD,
        decoder="decord",       # decord | pyav
        store_dir="",           # clip stores of `python -m maskdp_jax.prepare` ("" = decode)
        num_workers=8,          # decoding threads
        starts_on_stride=False,  # clips start on multiples of the stride (a store keeps 1/stride)
        eval_crops=1,           # spatial evaluation crops (1 or 3) per temporal view
        augment=False,          # nonprivate only: random crop position + horizontal flip
        validate="metadata",    # metadata | full
        skip_bad_videos=False,
        # What the masks' public region shows: anonymised (the anonymiser's output videos: the
        # avatar; a mask paired with its own source video is refused) | source (the papers'
        # "MaskDP on non-anonymised data": the real person, trained without protection; the
        # report says so).
        public_part="anonymised",
        **{**clip_keys(), "eval_clips": 5, "prefetch": 2},
    ))
