r"""Full-size parity: our Flax ``mvit_v2_s`` / ``mvit_v1_b`` with converted torchvision weights vs
torchvision.

    python benchmarks/mvit_parity_full.py --torch_python /work/venv-tv/bin/python
    python benchmarks/mvit_parity_full.py --torch_python /work/venv-tv/bin/python --preset mvit_v1_b

Two environments: the torch side (``--phase torch``, run by ``--torch_python``, an interpreter with
torch==2.14.1 / torchvision==0.29.1, see tests/fixtures/make_mvit_fixture.py) builds
``torchvision.models.video.<preset>()`` (400 classes; ``mvit_v2_s`` 34,537,744 parameters,
``mvit_v1_b`` 36,610,672) with every parameter random (no download), one random 16x224^2 clip,
and its logits in float64 and float32; it saves them with the state dict to a temporary ``.npz``.
This (JAX) side converts the state dict with ``models.convert`` into the preset of the same name,
runs the float32 Flax model and prints the relative error ``max |ours - ref| / max |ref|``
against both references. Done when <= 1e-4.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


PRESETS = ("mvit_v2_s", "mvit_v1_b")


def torch_phase(out: str, seed: int, preset: str) -> None:
    import torch
    from torchvision.models import video

    sys.path.insert(0, os.path.join(ROOT, "tests", "fixtures"))
    from make_mvit_fixture import randomise

    gen = torch.Generator().manual_seed(seed)
    model = getattr(video, preset)().eval()
    randomise(model, gen)
    x = torch.randn((1, 3, 16, 224, 224), generator=gen)
    with torch.no_grad():
        t = time.perf_counter()
        logits32 = model(x)
        t32 = time.perf_counter() - t
        logits64 = model.double()(x.double())
    state = {f"state.{k}": v.float().numpy() for k, v in model.state_dict().items()}
    np.savez(out, input=x.numpy(), logits64=logits64.numpy(), logits32=logits32.numpy(),
             torch_seconds=np.float64(t32), **state)


def relative_error(out, ref) -> float:
    return float(np.abs(np.asarray(out, np.float64) - ref).max() / np.abs(ref).max())


def jax_phase(path: str, preset: str) -> None:
    import jax
    import jax.numpy as jnp

    sys.path.insert(0, ROOT)
    from maskdp_jax import models
    from maskdp_jax.models import convert

    with np.load(path) as f:
        arrays = {k: f[k] for k in f.files}
    state = {k.removeprefix("state."): v for k, v in arrays.items() if k.startswith("state.")}
    model = models.get_model(preset, num_classes=400)
    x = jnp.asarray(arrays["input"].transpose(0, 2, 3, 4, 1))
    like = convert.import_template(model, input_shape=x.shape[1:], key=jax.random.key(0))
    params, info = convert.convert_state_dict(state, like=like)
    assert info["head"] == "loaded" and not info["kept_from_init"], info
    apply = jax.jit(lambda p, v: model.apply({"params": p}, v))
    t = time.perf_counter()
    out = apply(params, x).block_until_ready()
    t_first = time.perf_counter() - t
    t = time.perf_counter()
    out = apply(params, x).block_until_ready()
    t_run = time.perf_counter() - t
    n = models.finetune.count_params(params)
    ref64, ref32 = arrays["logits64"], arrays["logits32"]
    print(f"{preset}, {n:,} parameters converted ({info['format']}), clip {tuple(x.shape)}")
    print(f"logits: max |ref| {np.abs(ref64).max():.4f}, top-1 ours {int(np.argmax(out))} "
          f"torch {int(np.argmax(ref64))}")
    print(f"relative error ours(f32) vs torch(f64): {relative_error(out, ref64):.3e}")
    print(f"relative error ours(f32) vs torch(f32): {relative_error(out, ref32):.3e}")
    print(f"relative error torch(f32) vs torch(f64): {relative_error(ref32, ref64):.3e}")
    print(f"forward seconds: jax compile+run {t_first:.1f}, jax run {t_run:.1f}, "
          f"torch f32 run {float(arrays['torch_seconds']):.1f}")
    print(f"jax {jax.__version__} on {jax.devices()[0].platform}")
    if relative_error(out, ref64) > 1e-4:
        raise SystemExit("FAILED: relative error above 1e-4")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--phase", choices=("all", "torch", "jax"), default="all")
    parser.add_argument("--torch_python", default="/work/venv-tv/bin/python",
                        help="interpreter with torch/torchvision for the reference")
    parser.add_argument("--out", default=None, help="reference .npz (default: a temporary file)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--preset", choices=PRESETS, default="mvit_v2_s")
    args = parser.parse_args()
    if args.phase == "torch":
        torch_phase(args.out, args.seed, args.preset)
        return
    if args.phase == "jax":
        jax_phase(args.out, args.preset)
        return
    with tempfile.TemporaryDirectory() as tmp:
        out = args.out or os.path.join(tmp, f"{args.preset}_reference.npz")
        subprocess.run([args.torch_python, os.path.abspath(__file__), "--phase", "torch",
                        "--out", out, "--seed", str(args.seed), "--preset", args.preset],
                       check=True)
        jax_phase(out, args.preset)


if __name__ == "__main__":
    main()
