r"""Import torchvision or PySlowFast MViT weights (v2 and v1) into the Flax tree of ``models.mvit``.

Usage::

    # torchvision K400 weights (https://download.pytorch.org/models/mvit_v2_s-ae3be167.pth) with a
    # fresh 60-class head, written as an orbax checkpoint that train.py starts from:
    python -m maskdp_jax.convert --src mvit_v2_s-ae3be167.pth --dst /tmp/mvit_v2_s_k400 \
        --num_classes 60 --preset mvit_v2_s
    python train.py --config.model.name=mvit_v2_s --config.model.init_from=/tmp/mvit_v2_s_k400
    # Luo et al. 2024's MViT-B 16x4 (https://download.pytorch.org/models/mvit_v1_b-dbeb1030.pth):
    python -m maskdp_jax.convert --src mvit_v1_b-dbeb1030.pth --dst /tmp/mvit_v1_b_k400 \
        --num_classes 101 --preset mvit_v1_b

Inputs: a torchvision ``state_dict`` or a PySlowFast checkpoint (``model_state`` inside), as
``.pth``/``.pt``/``.pyth`` (read with torch, which must then be installed), ``.safetensors`` or
``.npz`` (read without torch). The format is recognised from the key names.

Every checkpoint tensor must be consumed and every model parameter assigned (shapes checked,
errors name the checkpoint key and the parameter); the only exceptions are the head, re-initialised
when the number of classes differs, and the adapters (absent from published checkpoints; they
start as the identity). Layouts: Linear ``[out, in]`` -> Dense kernel ``[in, out]``; Conv3d
``[out, in / groups, kT, kH, kW]`` -> Flax ``[kT, kH, kW, in / groups, out]`` (the depthwise pooling
convs included); LayerNorm ``weight`` -> ``scale``; relative position tables ``[2 S - 1, head_dim]``
as they are; class token ``[D]`` (torchvision) or ``[1, 1, D]`` (PySlowFast) -> ``[D]``; MViTv1's
absolute position tables (torchvision ``pos_encoding.{spatial,temporal,class}_pos``, PySlowFast
``pos_embed_{spatial,temporal,class}`` with a leading 1) -> ``[H' W', D]``, ``[T', D]``, ``[D]``.

Privacy: the imported weights are public (pre-trained on Kinetics-400); nothing here touches
private data.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import orbax.checkpoint as ocp
from flax import traverse_util

from maskdp_jax.models.mvit import Adapter

FORMATS = ("torchvision", "pyslowfast")

# (pattern on the dotted Flax path, replacement giving the checkpoint key), applied in order.
_COMMON_RULES = [
    (r"^blocks_(\d+)\.", r"blocks.\1."),
    (r"\.(kernel|scale)$", r".weight"),
]
_RULES = {
    "torchvision": [
        (r"^cls_token$", "pos_encoding.class_token"),
        (r"^(spatial_pos|temporal_pos|class_pos)$", r"pos_encoding.\1"),
        (r"^patch_embed\.", "conv_proj."),
        (r"\.attn\.proj\.", ".attn.project.0."),
        (r"\.attn\.(pool_[qkv])\.conv\.", r".attn.\1.pool."),
        (r"\.attn\.(pool_[qkv])\.norm\.", r".attn.\1.norm_act.0."),
        (r"\.mlp\.fc1\.", ".mlp.0."),
        (r"\.mlp\.fc2\.", ".mlp.3."),
        (r"^head\.", "head.1."),
    ],
    "pyslowfast": [
        (r"^patch_embed\.", "patch_embed.proj."),
        (r"^(spatial|temporal|class)_pos$", r"pos_embed_\1"),
        (r"\.attn\.pool_([qkv])\.conv\.", r".attn.pool_\1."),
        (r"\.attn\.pool_([qkv])\.norm\.", r".attn.norm_\1."),
        (r"\.project\.", ".proj."),
        (r"^head\.", "head.projection."),
    ],
}
# A key that identifies each format.
_SIGNATURES = {"torchvision": "conv_proj.weight", "pyslowfast": "patch_embed.proj.weight"}


class ConversionError(ValueError):
    """A checkpoint that does not fit the model (missing, unused or mis-shaped tensors)."""


# ----------------------------------------------------------------------------------------------
# Reading checkpoints
# ----------------------------------------------------------------------------------------------
def load_state_dict(path: str) -> dict[str, np.ndarray]:
    """Reads ``{key: float32 array}`` from ``.pth``/``.pt``/``.pyth``, ``.safetensors`` or ``.npz``.

    PySlowFast files wrap the weights in ``model_state``; a ``module.`` prefix
    (DistributedDataParallel) is removed.
    """
    if not os.path.isfile(path):
        raise FileNotFoundError(f"checkpoint file {path!r} does not exist.")
    suffix = os.path.splitext(path)[1].lower()
    if suffix in (".pth", ".pt", ".pyth"):
        try:
            import torch
        except ImportError as e:
            raise ImportError(
                f"reading {path!r} needs PyTorch (`pip install torch`); or convert it once, "
                "where torch is installed, to .safetensors "
                "(safetensors.torch.save_file(state_dict, ...)) or .npz and pass that instead."
            ) from e
        raw = torch.load(path, map_location="cpu", weights_only=True)
        for wrapper in ("model_state", "state_dict", "model"):
            if isinstance(raw, Mapping) and wrapper in raw and isinstance(raw[wrapper], Mapping):
                raw = raw[wrapper]
                break
        state = {k: v.detach().float().numpy() for k, v in raw.items() if hasattr(v, "detach")}
    elif suffix == ".safetensors":
        from safetensors.numpy import load_file

        state = load_file(path)
    elif suffix == ".npz":
        with np.load(path) as f:
            state = {k: f[k] for k in f.files}
    else:
        raise ValueError(
            f"unsupported checkpoint file {path!r}: expected .pth/.pt/.pyth (torch), "
            ".safetensors or .npz."
        )
    state = {k.removeprefix("module."): np.asarray(v, np.float32) for k, v in state.items()}
    if not state:
        raise ConversionError(f"no tensors found in {path!r}.")
    return state


def detect_format(state: Mapping[str, Any]) -> str:
    """``'torchvision'`` or ``'pyslowfast'``, from the key names."""
    found = [fmt for fmt, key in _SIGNATURES.items() if key in state]
    if len(found) != 1:
        raise ConversionError(
            "cannot tell the checkpoint format: expected exactly one of the keys "
            f"{sorted(_SIGNATURES.values())}; the first keys are {sorted(state)[:8]}."
        )
    return found[0]


def source_key(path: tuple[str, ...], fmt: str) -> str:
    """Checkpoint key of the Flax parameter at ``path``, e.g.

    >>> source_key(("blocks_3", "attn", "pool_q", "conv", "kernel"), "torchvision")
    'blocks.3.attn.pool_q.pool.weight'
    >>> source_key(("blocks_3", "attn", "pool_q", "norm", "scale"), "pyslowfast")
    'blocks.3.attn.norm_q.weight'
    >>> source_key(("temporal_pos",), "torchvision"), source_key(("temporal_pos",), "pyslowfast")
    ('pos_encoding.temporal_pos', 'pos_embed_temporal')
    """
    if fmt not in FORMATS:
        raise ValueError(f"unknown checkpoint format {fmt!r}; choose from {FORMATS}.")
    name = ".".join(path)
    for pattern, repl in _COMMON_RULES + _RULES[fmt]:
        name = re.sub(pattern, repl, name)
    return name


def _to_flax_layout(value: np.ndarray, path: tuple[str, ...]) -> np.ndarray:
    """Torch layout -> Flax layout for the parameter at ``path``."""
    if path[-1] == "kernel" and value.ndim == 5:  # Conv3d [O, I, kT, kH, kW] -> [kT, kH, kW, I, O]
        return value.transpose(2, 3, 4, 1, 0)
    if path[-1] == "kernel" and value.ndim == 2:  # Linear [O, I] -> [I, O]
        return value.T
    if path in (("cls_token",), ("class_pos",)):  # PySlowFast keeps them as [1, 1, D]
        return value.reshape(-1)
    if path in (("spatial_pos",), ("temporal_pos",)):  # PySlowFast: [1, n, D]
        return value.reshape(-1, value.shape[-1])
    return value


def _path_str(path: tuple[str, ...]) -> str:
    return "/".join(path)


def _separate_qkv(state: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """PySlowFast ``SEPARATE_QKV``: stack ``attn.q/k/v`` into the fused ``attn.qkv`` we use."""
    state = dict(state)
    for key in [k for k in state if re.search(r"\.attn\.q\.(weight|bias)$", k)]:
        parts = [key.replace(".attn.q.", f".attn.{n}.") for n in "qkv"]
        if all(p in state for p in parts):
            state[key.replace(".attn.q.", ".attn.qkv.")] = np.concatenate(
                [state.pop(p) for p in parts], axis=0)
    return state


# ----------------------------------------------------------------------------------------------
# Converting
# ----------------------------------------------------------------------------------------------
def convert_state_dict(
    state: Mapping[str, np.ndarray], *, like: Any, fmt: str | None = None,
) -> tuple[dict, dict]:
    """Checkpoint tensors -> a parameter tree shaped like ``like``.

    Args:
      state: ``{checkpoint key: array}`` in torch layout (torchvision or PySlowFast names).
      like: the model's parameter tree (arrays or ``jax.ShapeDtypeStruct``). Its head and adapter
        leaves must be concrete arrays: they are used as is when the checkpoint has no value for
        them (a head for a different number of classes; adapters).
      fmt: ``'torchvision'``, ``'pyslowfast'`` or None to detect it.

    Returns:
      ``(params, info)``: the Flax parameter tree (float32 NumPy arrays where loaded) and
      ``{'format', 'head': 'loaded' | 'replaced', 'kept_from_init': [paths]}``.

    Raises:
      ConversionError: naming the key and the shapes when a tensor is missing, unused or does not
        fit.
    """
    fmt = fmt or detect_format(state)
    state = _separate_qkv(state) if fmt == "pyslowfast" else dict(state)
    flat_like = traverse_util.flatten_dict(like)
    out, kept, consumed, errors = {}, [], set(), []
    head = "loaded"
    for path, target in flat_like.items():
        key = source_key(path, fmt)
        if "adapter" in path:
            if key in state:
                raise ConversionError(f"checkpoint unexpectedly holds adapter weights {key!r}.")
            kept.append(_path_str(path))
            out[path] = target
            continue
        if key not in state:
            errors.append(f"missing checkpoint key {key!r} for parameter {_path_str(path)} "
                          f"{tuple(target.shape)}")
            continue
        consumed.add(key)
        value = _to_flax_layout(state[key], path)
        if value.shape != tuple(target.shape):
            if path[0] == "head" and value.shape[:-1] == tuple(target.shape)[:-1]:
                head = "replaced"  # a different number of classes: keep the fresh head
                kept.append(_path_str(path))
                out[path] = target
                continue
            errors.append(
                f"checkpoint key {key!r} has shape {state[key].shape} (-> {value.shape} in Flax "
                f"layout) but parameter {_path_str(path)} expects {tuple(target.shape)}"
            )
            continue
        out[path] = value.astype(np.float32, copy=False)
    unused = sorted(set(state) - consumed)
    if unused:
        errors.append(f"{len(unused)} checkpoint key(s) not used by the model: {unused[:12]}")
    if errors:
        raise ConversionError(
            f"{fmt} checkpoint does not fit the model:\n  " + "\n  ".join(errors)
        )
    for path in kept:
        if isinstance(out[tuple(path.split("/"))], jax.ShapeDtypeStruct):
            raise ConversionError(f"parameter {path} is not in the checkpoint and `like` has no "
                                  "initial value for it; pass initialised parameters.")
    return traverse_util.unflatten_dict(out), {"format": fmt, "head": head,
                                               "kept_from_init": kept}


def import_template(model: nn.Module, *, input_shape, key: jax.Array) -> dict:
    """The parameter tree to import weights into, without running (or compiling) the network.

    Every leaf is a ``jax.ShapeDtypeStruct`` (``jax.eval_shape``) except those a published
    checkpoint cannot provide, which get fresh initial values: the head (used when the number of
    classes differs) and the adapters (identity at init). ``input_shape`` is one clip
    ``(T, H, W, 3)``.
    """
    shapes = jax.eval_shape(model.init, key, jnp.zeros((1, *input_shape), jnp.float32))["params"]
    key, head_key = jax.random.split(key)
    dim = shapes["head"]["kernel"].shape[0]
    params = {**shapes, "head": nn.Dense(model.num_classes).init(
        head_key, jnp.zeros((1, dim)))["params"]}
    for name, sub in shapes.items():
        if isinstance(sub, Mapping) and "adapter" in sub:
            width, bottleneck = sub["adapter"]["down"]["kernel"].shape
            key, adapter_key = jax.random.split(key)
            adapter = Adapter(width, bottleneck).init(adapter_key, jnp.zeros((1, width)))["params"]
            params[name] = {**sub, "adapter": adapter}
    return params


# ----------------------------------------------------------------------------------------------
# Orbax checkpoints
# ----------------------------------------------------------------------------------------------
def save_params(path: str, params: Any, *, info: Mapping[str, Any]) -> None:
    """Writes ``params`` and a JSON ``info`` record as an orbax checkpoint directory at ``path``."""
    path = os.path.abspath(path)
    if os.path.exists(path):
        raise FileExistsError(f"{path!r} already exists; choose a new --dst.")
    ckptr = ocp.Checkpointer(ocp.CompositeCheckpointHandler())
    ckptr.save(path, ocp.args.Composite(params=ocp.args.StandardSave(params),
                                        info=ocp.args.JsonSave(dict(info))))


def restore_params(path: str, *, like: Any) -> Any:
    """Parameters for a model from an orbax checkpoint written by this module, or straight from a
    torchvision/PySlowFast file (converted on the fly).

    Args:
      path: the orbax directory (``python -m maskdp_jax.convert --dst``) or a
        ``.pth``/``.safetensors``/``.npz`` checkpoint file.
      like: the model's parameters, as :func:`import_template` gives them (or a full
        ``model.init``). Adapters, absent from checkpoints, keep these values; for a checkpoint
        file, so does a head for a different number of classes, and so does the head for an
        orbax checkpoint exported without one (``python -m maskdp_jax.export --drop_head``).

    Returns:
      A parameter tree with the structure and shapes of ``like``.
    """
    if os.path.isfile(path):
        params, info = convert_state_dict(load_state_dict(path), like=like)
        print(f"Loaded {info['format']} weights from {path} (head {info['head']}).")
        return jax.tree.map(jnp.asarray, params)
    if not os.path.isdir(path):
        raise FileNotFoundError(
            f"init_from={path!r} is neither an orbax checkpoint directory nor a checkpoint file; "
            "write one with `python -m maskdp_jax.convert --src ... --dst ...`."
        )
    ckptr = ocp.Checkpointer(ocp.CompositeCheckpointHandler())
    restored = ckptr.restore(os.path.abspath(path),
                             ocp.args.Composite(params=ocp.args.StandardRestore(),
                                                info=ocp.args.JsonRestore()))
    flat = traverse_util.flatten_dict(restored["params"])
    out, errors = {}, []
    for p, target in traverse_util.flatten_dict(like).items():
        if p in flat:
            value = flat.pop(p)
            if tuple(value.shape) != tuple(target.shape):
                hint = ""
                if p[0] == "head":
                    hint = (" (number of classes differs: re-run "
                            "`python -m maskdp_jax.convert` with --num_classes)")
                errors.append(f"{_path_str(p)}: checkpoint {tuple(value.shape)}, model "
                              f"{tuple(target.shape)}{hint}")
            out[p] = jnp.asarray(value, target.dtype)
        elif "adapter" in p or (p[0] == "head" and restored["info"].get("head") == "dropped"):
            out[p] = target  # not in the checkpoint by design: the model's fresh values
        else:
            errors.append(f"{_path_str(p)}: missing from the checkpoint")
    errors += [f"{_path_str(p)}: in the checkpoint but not in the model" for p in flat]
    if errors:
        raise ConversionError(f"checkpoint {path!r} (preset {restored['info'].get('preset')!r}) "
                              "does not fit the model:\n  " + "\n  ".join(errors))
    return traverse_util.unflatten_dict(out)
