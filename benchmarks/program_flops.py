r"""The matrix-product FLOPs of a lowered JAX program, counted on the host from its StableHLO, by
the operands' dtypes.

    python benchmarks/program_flops.py --preset=mvit_v2_s --strategy=full --physical=2 \
        --compute_dtype=bfloat16 --programs=forward,public-nonprivate,private-maskdp-ghost

Why by hand: XLA's cost analysis of a lowered program is what a backend chooses to give (jax
0.11.2 on an H200 gave none), and of a compiled GPU program it counts cuDNN and cuBLAS custom
calls as zero FLOPs; neither says in which dtype a product runs. The StableHLO text of
``jax.jit(f).lower(...)`` is the same on every backend: each ``stablehlo.dot_general`` and
``stablehlo.convolution`` carries its operand and result types, from which its FLOPs follow
(2 × the result's elements × the contracted elements per result; a convolution contracts its
kernel's window and input features). A function called twice (a nested ``jit``) counts twice.
The body of a ``while`` (``lax.scan``, ``lax.map``: the micro-batched private pass) is counted
once, whatever its trip count, and the count says how many loops it met, so a program with loops
is a lower bound: count the whole physical batch at once (``microbatch_size=None``, ghost norms)
for a total.

Elementwise operations, reductions and transcendental functions are not counted: on the
models here the products are nearly all of the arithmetic and all of what runs on a GPU's
matrix units, which is what a share of the dense peak means.
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import math
import os
import re
import sys

# a StableHLO tensor type: tensor<2x5x4xbf16>, tensor<f32> (a scalar)
_TENSOR = re.compile(r"tensor<((?:\d+x)*)([a-z]+\d*)>")
_FUNC = re.compile(r"^\s*func\.func (?:public |private )?@([\w.$-]+)\(")
_CALL = re.compile(r"\bcall @([\w.$-]+)\(")
_SIGNATURE = re.compile(r":\s*\((tensor<[^)]*)\)\s*->\s*(tensor<[^,\s]*>)")
_CONTRACTING = re.compile(r"contracting_dims = \[([\d, ]*)\] x \[")
_KERNEL_LAYOUT = re.compile(r"dim_numbers = \[[^\]]*\]x\[([^\]]*)\]->")


def _tensor(text: str) -> tuple[tuple[int, ...], str]:
    match = _TENSOR.search(text)
    if match is None:
        raise ValueError(f"no tensor type in {text!r}")
    dims = tuple(int(d) for d in match.group(1).split("x") if d)
    return dims, match.group(2)


@dataclasses.dataclass
class Count:
    """Matrix-product FLOPs by ``(lhs dtype, rhs dtype)``, and how many ``while`` loops the
    program has (each body counted once: the count is then a lower bound)."""

    flops: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    products: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    loops: int = 0

    @property
    def total(self) -> float:
        return float(sum(self.flops.values()))

    def share(self, lhs: str, rhs: str | None = None) -> float:
        """The fraction of the FLOPs whose operands are ``lhs`` × ``rhs`` (default the same)."""
        total = self.total
        return self.flops[(lhs, rhs or lhs)] / total if total else 0.0

    def add(self, other: Count) -> None:
        self.flops.update(other.flops)
        self.products.update(other.products)
        self.loops += other.loops

    def lines(self) -> list[str]:
        """One line per operand-dtype pair, largest first: GFLOP, share, number of products."""
        total = self.total or 1.0
        return [f"{lhs} x {rhs}: {flops / 1e9:.4g} GFLOP ({100 * flops / total:.1f} %, "
                f"{self.products[(lhs, rhs)]} products)"
                for (lhs, rhs), flops in self.flops.most_common()]


def _product_flops(line: str) -> tuple[float, str, str] | None:
    """``(flops, lhs dtype, rhs dtype)`` of one ``dot_general`` or ``convolution`` line."""
    is_dot = "stablehlo.dot_general" in line
    if not (is_dot or "stablehlo.convolution" in line):
        return None
    signature = _SIGNATURE.search(line)
    if signature is None:
        raise ValueError(f"a product without its operand types: {line.strip()[:200]}")
    lhs_text, rhs_text = signature.group(1).split(", tensor<")
    (lhs, lhs_dtype), (rhs, rhs_dtype) = _tensor(lhs_text), _tensor("tensor<" + rhs_text)
    out, _ = _tensor(signature.group(2))
    if is_dot:
        contracting = _CONTRACTING.search(line)
        dims = [int(d) for d in contracting.group(1).split(",") if d.strip()] if contracting else []
        per_output = math.prod(lhs[d] for d in dims)
    else:
        layout = [d.strip() for d in _KERNEL_LAYOUT.search(line).group(1).split(",")]
        per_output = math.prod(rhs) // rhs[layout.index("o")]
    return 2.0 * math.prod(out) * per_output, lhs_dtype, rhs_dtype


def count_text(text: str, entry: str = "main") -> Count:
    """The products of the StableHLO module ``text`` reached from function ``entry``."""
    own: dict[str, Count] = {}
    calls: dict[str, list[str]] = {}
    name = None
    for line in text.splitlines():
        func = _FUNC.match(line)
        if func:
            name = func.group(1)
            own[name], calls[name] = Count(), []
            continue
        if name is None:
            continue
        if "stablehlo.while" in line:
            own[name].loops += 1
        calls[name] += _CALL.findall(line)
        product = _product_flops(line)
        if product:
            flops, lhs, rhs = product
            own[name].flops[(lhs, rhs)] += flops
            own[name].products[(lhs, rhs)] += 1
    if entry not in own:
        raise ValueError(f"no function @{entry} in the module (functions: {sorted(own)})")
    memo: dict[str, Count] = {}

    def reached(fn: str) -> Count:
        if fn not in memo:
            count = Count()
            count.add(own[fn])
            for callee in calls[fn]:
                count.add(reached(callee))
            memo[fn] = count
        return memo[fn]

    return reached(entry)


def count(lowered) -> Count:
    """The products of a ``jax.jit(f).lower(...)`` program."""
    return count_text(lowered.as_text())


def main() -> None:
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    import functools

    import jax

    from benchmarks import opacus_maskdp as bench
    from benchmarks.step_parts import build
    from maskdp_jax.core import partition
    from maskdp_jax.core import train_step as ts
    from maskdp_jax.run import model as run_model

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--preset", default="mvit_v2_s")
    parser.add_argument("--strategy", choices=("selective", "full"), default="full")
    parser.add_argument("--physical", type=int, default=2)
    parser.add_argument("--classes", type=int, default=60)
    parser.add_argument("--compute_dtype", choices=("float32", "bfloat16"), default="bfloat16")
    parser.add_argument("--programs", default="forward,public-nonprivate,private-maskdp-ghost",
                        help="forward, public-<mode>, private-<mode>[-ghost]")
    args = parser.parse_args()
    size = dict(preset=args.preset, classes=args.classes, batch=args.physical,
                physical=args.physical, microbatch=None)
    jmodel, trainable, frozen, apply_fn = build(size, args.strategy, "random", args.compute_dtype)
    data = bench.make_data(n=args.physical, input_size=jmodel.input_size,
                           classes=args.classes, seed=1)
    batch = bench.jax_batches(data, args.physical)[0]
    cfg = bench.dp_config(size, jmodel, sigma=1.0, clip=1.0)
    acc = jax.eval_shape(ts.zeros_accumulator, trainable)
    print(f"{args.preset}, {args.strategy} fine-tuning, physical batch {args.physical}, "
          f"{args.compute_dtype} compute, jax {jax.__version__}; matrix-product FLOPs of the "
          "lowered program by operand dtypes:")
    for program in args.programs.split(","):
        if program == "forward":
            lowered = jax.jit(apply_fn).lower(partition.merge(trainable, frozen),
                                              batch["video"][:, 0])
        else:
            kind, mode, *engine = program.split("-")
            extra = {"microbatch_size": None,
                     "ghost_rules": run_model.ghost_rules() if engine else None}
            lowered = jax.jit(functools.partial(
                ts.accumulate, public=kind == "public", apply_fn=apply_fn,
                **bench.step_args(cfg, mode) | extra)).lower(acc, trainable, frozen, batch)
        counted = count(lowered)
        loops = f", {counted.loops} loops counted once" if counted.loops else ""
        print(f"  {program}: {counted.total / 1e9:.4g} GFLOP per physical batch{loops}")
        for line in counted.lines():
            print(f"    {line}")


if __name__ == "__main__":
    main()
