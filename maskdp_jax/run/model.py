"""The one place a run's model is built: preset, initial or pre-trained weights, the
trainable/frozen split, and the functions that apply it.

``train.py``, the audits (:mod:`maskdp_jax.audit.shadows`) and the benchmarks all build their model
here, from the same ``config.model`` section (``configs/default.py``), so an audit audits the model
a user trains: the same preset, compute dtype, fine-tuning strategy, ``num_last_blocks``,
pre-trained weights and initial values for the same ``config.seed``.

>>> from maskdp_jax.configs import default
>>> config = default.model()  # from scratch: the default's shipped backbone is mvit_cpu's
>>> config.name, config.finetune = "mvit_test", "selective"
>>> built = build(config, num_classes=3, seed=0)
>>> built.input_shape
(8, 32, 32, 3)
>>> 0 < built.counts()["trainable"] < built.counts()["total"]
True
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Callable, Mapping
from typing import Any

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import safetensors.numpy
from flax import traverse_util

from maskdp_jax import models, weights
from maskdp_jax.core import ghost, partition
from maskdp_jax.core.tokenizer import Tokenizer
from maskdp_jax.data import atomic
from maskdp_jax.data.clips import PixelNorm

# bfloat16: products in bfloat16; parameters, norms, softmax, residual stream, logits and every
# gradient (so clipping, sums and noise) in float32 (models/mvit.py).
COMPUTE_DTYPES = {"float32": jnp.float32, "bfloat16": jnp.bfloat16}
# What config.compute.dtype accepts: a dtype above, or "auto" (compute_dtype_name).
COMPUTE_DTYPE_CHOICES = ("auto", *COMPUTE_DTYPES)


def compute_dtype_name(name: str, backend: str | None = None) -> str:
    """The compute dtype ``config.compute.dtype`` names on ``backend`` (default: JAX's
    default backend): ``"auto"`` is ``"bfloat16"`` on a GPU or TPU, whose matrix units run
    bfloat16 products at several times their float32 rate (faster steps on an H100:
    benchmarks/results/the_gpu_suite_on_an_h100.md), and ``"float32"`` on the CPU, where
    bfloat16 is slower (docs/benchmarks.md, "bfloat16 on the CPU") and where every committed
    result was computed: CPU results do not change. Parameters, norms, logits, gradients,
    clipping and noise are float32 either way (models/mvit.py); the accuracy of bfloat16 against
    float32 on the embedded data is the committed comparison in docs/results/precision/
    (tests/test_reporting_committed_results.py).

    >>> compute_dtype_name("auto", "gpu"), compute_dtype_name("auto", "cpu")
    ('bfloat16', 'float32')
    """
    if name not in COMPUTE_DTYPE_CHOICES:
        raise ValueError(f"compute.dtype must be one of {COMPUTE_DTYPE_CHOICES}; got "
                         f"{name!r}.")
    if name != "auto":
        return name
    return "float32" if (backend or jax.default_backend()) == "cpu" else "bfloat16"

# How the private pass gets each example's gradient norm (config.compute.per_example): "vmap"
# materialises per-example gradients; "ghost" computes norms and the clipped sum from one
# backward's activations and output cotangents (maskdp_jax.core.ghost); "auto" picks "ghost" for the
# (model, fine-tuning strategy) pairs of AUTO_GHOST, "vmap" otherwise.
PER_EXAMPLE = ("auto", "vmap", "ghost")
# Why these pairs (docs/benchmarks.md, "Ghost norms"): at mvit_v2_s, full fine-tuning, the ghost
# private pass is faster than vmap's micro-batches and compiles faster; at mvit_tiny (the CPU
# presets' size) it is slower than vmap with full fine-tuning, and with selective fine-tuning no
# faster and slower to compile. mvit_v1_b has mvit_v2_s's widths and token grids.
AUTO_GHOST = frozenset({("mvit_v2_s", "full"), ("mvit_v1_b", "full")})


@dataclasses.dataclass(frozen=True, eq=False)
class RunModel:
    """A built model and its parameters, split for fine-tuning.

    Attributes:
      module: the Flax module (:class:`maskdp_jax.models.MViT`).
      trainable: the parameters that train (the only ones with gradients, clipped and noised).
      frozen: the rest, closed over by the step (no gradient is taken w.r.t. them).
      trainable_mask: boolean pytree like the full parameters, True where a parameter trains.
      input_shape: one clip, ``(T, H, W, 3)`` (the preset's input size, or the one
        :func:`build` was given).
      apply_fn: ``apply_fn(params, x) -> logits``: ``x [n, T, H, W, 3]`` float32 pixels,
        logits ``[n, num_classes]`` float32.
    """

    module: Any
    trainable: Any
    frozen: Any
    trainable_mask: Any
    input_shape: tuple[int, int, int, int]
    apply_fn: Callable[[Any, jax.Array], jax.Array]

    @property
    def params(self) -> Any:
        """The full parameter tree (trainable and frozen merged)."""
        return partition.merge(self.trainable, self.frozen)

    def private_mask(self, strategy: str, *, num_last_blocks: int = 2) -> Any:
        """The trainable parameters that fine-tuning ``strategy`` selects, as a mask in the
        structure of ``trainable`` (``Mechanism.private_mask``: what the private pass
        trains); None for ``""`` (all of them).

        Raises:
          ValueError: the strategy selects a frozen parameter, or no trainable one.
        """
        if not strategy:
            return None
        wanted = traverse_util.flatten_dict(models.finetune.trainable_mask(
            self.params, strategy=strategy, num_last_blocks=num_last_blocks))
        trainable = traverse_util.flatten_dict(self.trainable)
        outside = sorted("/".join(k) for k, v in wanted.items() if v and k not in trainable)
        if outside:
            raise ValueError(f"privacy.private_finetune={strategy!r} selects parameters that "
                             f"model.finetune freezes ({outside[:3]}...): choose a part of the "
                             "trained parameters (e.g. 'linear', the head).")
        mask = {k: bool(wanted[k]) for k in trainable}
        if not any(mask.values()):
            raise ValueError(f"privacy.private_finetune={strategy!r} selects no trainable "
                             "parameter.")
        return traverse_util.unflatten_dict(mask)

    def apply_from(self, start_block: int) -> Callable[[Any, jax.Array], jax.Array]:
        """``apply(params, tokens) -> logits`` that starts at block ``start_block``: the
        trainable suffix the feature cache's steps run (``tokens [n, L, D]``, the cached output
        of the frozen prefix)."""
        module = self.module

        def apply(params, tokens):
            return module.apply({"params": params}, tokens, start_block=start_block)

        return apply

    def tokenizer(self, *, fill_value: float = 0.0, fill_texture: float = 1.0) -> Tokenizer:
        """The cell geometry of the two views on this model's patch-embedding grid, and what
        they write into hidden cells (:func:`maskdp_jax.core.tokenizer.hidden_fill`)."""
        return Tokenizer(patch_stride=tuple(self.module.patch_stride), fill_value=fill_value,
                         fill_texture=fill_texture)

    def counts(self) -> dict[str, int]:
        """``{"trainable": ..., "total": ...}`` parameter counts."""
        trainable = models.finetune.count_params(self.trainable)
        return {"trainable": trainable,
                "total": trainable + models.finetune.count_params(self.frozen)}


def ghost_rules() -> ghost.Rules:
    """The :class:`~maskdp_jax.core.ghost.LayerRule` of every trainable layer kind of our models
    (``models/ghost_rules.py``)."""
    return {key: ghost.LayerRule(**fields) for key, fields in models.ghost_rules.RULES.items()}


def per_example_rules(compute_config: ml_collections.ConfigDict,
                      model_config: ml_collections.ConfigDict, *,
                      private_part: str = "") -> ghost.Rules | None:
    """The private pass' ``ghost_rules`` (:func:`maskdp_jax.core.train_step.make_train_step`) for
    ``compute.per_example``: None for ``vmap``, :func:`ghost_rules` for ``ghost``, and for
    ``auto`` the measured choice for ``model.name`` and ``model.finetune`` (``AUTO_GHOST``), or
    ``vmap`` where the private pass trains a part of the parameters (``private_part``,
    ``privacy.private_finetune``: ghost norms follow every trainable layer)."""
    choice = compute_config.per_example
    if choice not in PER_EXAMPLE:
        raise ValueError(f"compute.per_example must be one of {PER_EXAMPLE}; got {choice!r}.")
    if choice == "auto" and private_part:
        choice = "vmap"
    if choice == "auto":
        pair = (model_config.name, model_config.finetune)
        choice = "ghost" if pair in AUTO_GHOST else "vmap"
    return ghost_rules() if choice == "ghost" else None


def input_shape(name: str) -> tuple[int, int, int, int]:
    """One clip ``(T, H, W, 3)`` of the preset ``name`` (``run.config.check_config`` makes the
    input config agree with it, so no video needs decoding to learn it)."""
    if name not in models.PRESETS:
        raise ValueError(f"unknown model {name!r}; available: {sorted(models.PRESETS)}.")
    return (*models.PRESETS[name]["input_size"], 3)


def patch_stride(name: str) -> tuple[int, int, int]:
    """The patch-embedding stride of the preset ``name``: the token-cell geometry of the views,
    known before any parameter exists."""
    return tuple(models.get_model(name, num_classes=1).patch_stride)


def build(model_config: ml_collections.ConfigDict, *, num_classes: int, seed: int,
          compute: ml_collections.ConfigDict | None = None, params: Any = None,
          input_size: tuple[int, int, int] | None = None) -> RunModel:
    """The model ``model_config`` names, its parameters and their fine-tuning split.

    Args:
      model_config: ``config.model``: ``name`` (a preset of
        :data:`maskdp_jax.models.presets.PRESETS`), ``finetune`` (a strategy of
        :mod:`maskdp_jax.models.finetune`), ``num_last_blocks`` (k for ``selective``), ``init_from``
        (public pre-trained weights: an orbax checkpoint of ``python -m maskdp_jax.convert``
        or a checkpoint file, a trained model directory, or ``"shipped:<name>"``, weights that
        ship with the package, ``maskdp_jax.weights``; "" for random initial values).
      num_classes: classes of the head.
      seed: the public ``config.seed``; the initial values (of everything when ``init_from``
        is empty, else of the head and adapters) derive from it. Public on purpose: initial
        values are not privacy noise.
      compute: ``config.compute`` (how the model computes, never what: ``dtype``, ``auto`` |
        ``float32`` | ``bfloat16``, :func:`compute_dtype_name`; ``attention``, the attention
        kernel of :func:`maskdp_jax.models.mvit.attention_implementation`); None: both
        ``auto``.
      params: parameters to start from instead of ``init_from`` or random values (e.g. weights
        converted in memory by a benchmark); a tree of the module's structure.
      input_size: clip ``(T, H, W)`` to build the preset's architecture for instead of its own
        ``input_size`` (the relative position tables are sized for it); None: the preset's.
        For probes of a large preset at a small size (``benchmarks/public_view_grad.py``): a
        training run uses the preset's size, which ``run.config.check_config`` matches to the
        data.

    Returns:
      A :class:`RunModel`.
    """
    m = model_config
    dtype = COMPUTE_DTYPES[compute_dtype_name("auto" if compute is None else compute.dtype)]
    overrides = {"adapters": True} if m.finetune == "adapters" else {}
    if compute is not None:
        overrides["attention_impl"] = compute.attention
    if input_size is not None:
        overrides["input_size"] = tuple(input_size)
    module = models.get_model(m.name, num_classes=num_classes, dtype=dtype, **overrides)
    shape = input_shape(m.name) if input_size is None else (*input_size, 3)
    key, _ = jax.random.split(jax.random.key(seed))
    if params is not None:
        params = jax.tree.map(jnp.asarray, params)
    elif m.init_from:
        # Pre-trained (public) weights; adapters, and a head for other classes, start fresh.
        like = models.convert.import_template(module, input_shape=shape, key=key)
        source = weights.resolve(m.init_from)
        if is_trained_model(source):
            params = _restore_trained(source, like=like, name=m.name, init_from=m.init_from)
        else:
            params = models.convert.restore_params(source, like=like)
    else:
        params = init_params(module, input_shape=shape, key=key)
    mask = models.finetune.trainable_mask(params, strategy=m.finetune,
                                          num_last_blocks=m.num_last_blocks)
    trainable, frozen = partition.split(params, mask)

    def apply_fn(params, x):
        return module.apply({"params": params}, x)

    return RunModel(module=module, trainable=trainable, frozen=frozen, trainable_mask=mask,
                    input_shape=shape, apply_fn=apply_fn)


def init_params(module, *, input_shape, key: jax.Array) -> Any:
    """Random initial parameters, initialised under ``jit`` with an RBG key drawn from ``key``.

    Deterministic given ``key``. With the default threefry key, compiling ``module.init`` takes
    several times longer than with RBG, even for the tiny presets; the initial values carry no
    privacy meaning, so the cheaper generator is used here only.
    """
    seed = int(jax.random.randint(key, (), 0, jnp.iinfo(jnp.int32).max))
    init_key = jax.random.key(seed, impl="rbg")
    return jax.jit(module.init)(init_key, jnp.zeros((1, *input_shape), jnp.float32))["params"]


# ----------------------------------------------------------------------------------------------
# The trained model: what a run hands over
# ----------------------------------------------------------------------------------------------
#: The files of a trained model directory (``<workdir>/model``, written by ``train.py``).
PARAMS_FILE = "params.safetensors"
INFO_FILE = "model.json"
TRAINED_FORMAT = "maskdp_jax trained model, version 1"


def is_trained_model(path: str) -> bool:
    """Whether ``path`` is a directory :func:`save_trained` wrote."""
    return os.path.isfile(os.path.join(path, INFO_FILE)) and os.path.isfile(
        os.path.join(path, PARAMS_FILE))


def save_trained(directory: str, params: Any, *, model_config: ml_collections.ConfigDict,
                 num_classes: int, class_names: list[str], pixel_norm: PixelNorm | None,
                 about: Mapping[str, Any]) -> str:
    """Write a trained model: ``params.safetensors`` (every parameter, keyed by its path in the
    tree, ``"blocks_0/attn/qkv/kernel"``) and ``model.json`` (what rebuilds the model: the
    ``config.model`` section, the classes, the pixel normalisation, and ``about``: the run's
    privacy statement and accuracy). Returns ``directory``.

    Safetensors because it is one file any framework reads (``safetensors.numpy.load_file``),
    holds only arrays (no code runs on load) and is written by one process; the directory is also
    a ``model.init_from`` for a later run (:func:`build`). The parameters are the released model:
    what the run's ε covers. Nothing of the checkpoint's secret or optimiser state is here.

    Raises:
      FileExistsError: ``directory`` exists and is not a trained model (a finished run's own
        model is replaced: a resumed run rewrites what it computes again).
    """
    if os.path.exists(directory) and not is_trained_model(directory):
        raise FileExistsError(f"{directory!r} exists and is not a trained model directory; "
                              "choose another --workdir.")
    os.makedirs(directory, exist_ok=True)
    flat = {"/".join(path): np.asarray(value)
            for path, value in traverse_util.flatten_dict(params).items()}
    info = {"format": TRAINED_FORMAT, "model": _plain(model_config.to_dict()),
            "num_classes": int(num_classes), "class_names": list(class_names),
            "pixel_norm": None if pixel_norm is None else {
                "mean": list(pixel_norm.mean), "std": list(pixel_norm.std)},
            **_plain(dict(about))}
    with atomic.replacing(os.path.join(directory, PARAMS_FILE)) as tmp:
        safetensors.numpy.save_file(flat, tmp, metadata={"format": TRAINED_FORMAT})
    # Strict JSON (no NaN or Infinity), readable by any JSON parser.
    atomic.write(os.path.join(directory, INFO_FILE),
                 json.dumps(info, indent=1, allow_nan=False) + "\n")
    return directory


@dataclasses.dataclass(frozen=True, eq=False)
class Trained:
    """A trained model loaded by :func:`load_trained`.

    Attributes:
      model: the :class:`RunModel`, its parameters the trained ones (``model.params``,
        ``model.apply_fn(params, x)`` with ``x [n, T, H, W, 3]`` normalised float32 pixels).
      info: ``model.json``: the model section, ``num_classes``, ``class_names``, ``pixel_norm``
        and what the run said of itself (privacy, accuracy).
    """

    model: RunModel
    info: dict[str, Any]

    @property
    def pixel_norm(self) -> PixelNorm | None:
        """How uint8 pixels become the model's input (None: the run read float inputs)."""
        norm = self.info.get("pixel_norm")
        return None if norm is None else PixelNorm(tuple(norm["mean"]), tuple(norm["std"]))


def load_trained(directory: str) -> Trained:
    """The model a run wrote to ``<workdir>/model`` (:func:`save_trained`), rebuilt and with its
    trained parameters; no checkpoint and no training code needed.

    >>> import tempfile
    >>> from maskdp_jax.configs import default
    >>> config = default.model()
    >>> config.name = "mvit_test"
    >>> built = build(config, num_classes=3, seed=0)
    >>> path = save_trained(tempfile.mkdtemp() + "/model", built.params, model_config=config,
    ...                     num_classes=3, class_names=["a", "b", "c"], pixel_norm=None,
    ...                     about={"epsilon": 1.0})
    >>> again = load_trained(path)
    >>> again.info["class_names"], again.model.counts() == built.counts()
    (['a', 'b', 'c'], True)

    Raises:
      FileNotFoundError: not a trained model directory.
    """
    if not is_trained_model(directory):
        raise FileNotFoundError(f"{directory!r} holds no trained model ({INFO_FILE} and "
                                f"{PARAMS_FILE}); a finished training run writes one to "
                                "<workdir>/model.")
    with open(os.path.join(directory, INFO_FILE)) as f:
        info = json.load(f)
    if not info.get("head", True):
        raise ValueError(f"{directory!r} is a backbone without a classifier (written by "
                         "`python -m maskdp_jax.pretrain`): fine-tune it, "
                         f"--config.model.init_from={directory}.")
    model_config = ml_collections.ConfigDict({**info["model"], "init_from": directory})
    return Trained(model=build(model_config, num_classes=info["num_classes"], seed=0), info=info)


def _restore_trained(directory: str, *, like: Any, name: str | None = None,
                     init_from: str = "") -> Any:
    """The parameters of a trained model directory, checked against ``like``'s tree: the same
    paths and shapes, except a head for another number of classes, which keeps ``like``'s fresh
    values (fine-tuning a trained model on other labels). ``name``: the preset being built; a
    directory of another preset is refused by name before any shape is compared."""
    with open(os.path.join(directory, INFO_FILE)) as f:
        info = json.load(f)
    has_head = info.get("head", True)
    if name is not None and info["model"]["name"] != name:
        raise ValueError(
            f"model.init_from={init_from or directory!r} holds a {info['model']['name']} model; "
            f"model.name is {name!r}. Give weights of {name} or train from scratch with "
            "--config.model.init_from=''.")
    flat = safetensors.numpy.load_file(os.path.join(directory, PARAMS_FILE))
    out, errors = {}, []
    for path, target in traverse_util.flatten_dict(like).items():
        value = flat.pop("/".join(path), None)
        if value is None:
            # Adapters are the fine-tuning's own, and a backbone's head was left out: fresh.
            if "adapter" in path or (path[0] == "head" and not has_head):
                out[path] = target
                continue
            errors.append(f"{'/'.join(path)}: missing")
        elif tuple(value.shape) != tuple(target.shape):
            if path[0] == "head":
                out[path] = target
                continue
            errors.append(f"{'/'.join(path)}: {tuple(value.shape)} in the file, "
                          f"{tuple(target.shape)} in the model")
        else:
            out[path] = jnp.asarray(value, target.dtype)
    errors += [f"{key}: not in the model" for key in flat]
    if errors:
        raise models.convert.ConversionError(
            f"the trained model in {directory!r} does not fit this model:\n  "
            + "\n  ".join(errors))
    return traverse_util.unflatten_dict(out)


def save_backbone(trained_dir: str, directory: str, *, about: Mapping[str, Any]) -> int:
    """Write the trained model in ``trained_dir`` without its classifier to ``directory``: a
    backbone for ``model.init_from``, from which a run learns a fresh head for its own classes
    (as when fine-tuning from public pretraining on other labels). ``model.json`` records
    ``"head": false`` and ``about`` (what the backbone was trained on); :func:`load_trained`
    refuses it. Returns the number of parameters written.

    Raises:
      FileNotFoundError: ``trained_dir`` holds no trained model.
      FileExistsError: ``directory`` exists and is not a trained model directory.
    """
    if not is_trained_model(trained_dir):
        raise FileNotFoundError(f"{trained_dir!r} holds no trained model ({INFO_FILE} and "
                                f"{PARAMS_FILE}).")
    if os.path.exists(directory) and not is_trained_model(directory):
        raise FileExistsError(f"{directory!r} exists and is not a trained model directory; "
                              "choose another destination.")
    flat = safetensors.numpy.load_file(os.path.join(trained_dir, PARAMS_FILE))
    backbone = {k: v for k, v in sorted(flat.items()) if not k.startswith("head/")}
    with open(os.path.join(trained_dir, INFO_FILE)) as f:
        info = json.load(f)
    info = {"format": TRAINED_FORMAT, "model": {**info["model"], "init_from": ""},
            "head": False, "pixel_norm": info["pixel_norm"], **_plain(dict(about))}
    os.makedirs(directory, exist_ok=True)
    with atomic.replacing(os.path.join(directory, PARAMS_FILE)) as tmp:
        safetensors.numpy.save_file(backbone, tmp, metadata={"format": TRAINED_FORMAT})
    atomic.write(os.path.join(directory, INFO_FILE),
                 json.dumps(info, indent=1, allow_nan=False, sort_keys=True) + "\n")
    return int(sum(v.size for v in backbone.values()))


def _plain(value: Any) -> Any:
    """JSON-ready copies (tuples to lists, numpy scalars to Python numbers)."""
    return json.loads(json.dumps(value, default=lambda x: x.item() if hasattr(x, "item")
                                 else list(x)))

