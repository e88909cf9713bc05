r"""A profile's top operations: time, share, FLOPs, bytes, and the rates they achieve.

    from benchmarks import trace_summary
    with jax.profiler.trace(log_dir, create_perfetto_trace=True):
        ...  # a few steps
    print(trace_summary.summarize(log_dir, texts, steps=2))

``texts`` maps each program's module name (``jit_public_pass``, ...) to its compiled HLO text
(``jax.jit(f).lower(...).compile().as_text()``). The trace (the Perfetto JSON JAX writes beside
its XPlane) has one event per executed operation, named by the HLO instruction (``hlo_op``) of
its module (``hlo_module``); on a GPU, the device's kernel events (a device process) are used,
else the host's. Per instruction the summary adds the events' time, then reads from the HLO
text what the instruction computes: the bytes of its result and operands, and the FLOPs of the
matrix products it runs (a ``dot``, a ``convolution``, a cuBLAS GEMM custom call, or a fusion
whose computation holds them). An operation without a product (elementwise, reductions,
copies) has FLOPs "-": its rate is its bytes per second. Custom calls whose arithmetic the text
does not state (cuDNN's fused attention) are named, with their time and bytes.

Why by hand: XProf and TensorBoard's profile plugin compute this from the XPlane, but neither is
installed on the device's image, nothing can be installed there beyond carried wheels, and their
op profile is an interactive page, not a table to commit. The Perfetto JSON and the HLO text
are what JAX itself writes.
"""

from __future__ import annotations

import collections
import glob
import gzip
import json
import math
import os
import re

_DTYPE_BYTES = {"pred": 1, "s8": 1, "u8": 1, "s16": 2, "u16": 2, "f16": 2, "bf16": 2, "s32": 4,
                "u32": 4, "f32": 4, "s64": 8, "u64": 8, "f64": 8, "c64": 8, "c128": 16,
                "f8e4m3fn": 1, "f8e5m2": 1}
_SHAPE = re.compile(r"\b([a-z]+\d*[a-z0-9]*)\[([\d,]*)\]")
_INSTRUCTION = re.compile(r"^\s*(?:ROOT )?%?([\w.\-]+) = (.*)$")
_COMPUTATION = re.compile(r"^\s*(?:ENTRY )?%?([\w.\-]+) \(.*\{\s*$")
_OPCODE = re.compile(r"^(?:\([^=]*?\)|[a-z]+\d*[a-z0-9]*\[[\d,]*\](?:\{[^}]*\})?|token\[\]) "
                     r"([\w\-]+)\((.*?)\)(?:,|$)")
_CALLS = re.compile(r"calls=%?([\w.\-]+)")
_CONTRACTING = re.compile(r'lhs_contracting_dim(?:ension)?s["=:\s{\[]*([\d,"\s]*)')
_WINDOW = re.compile(r"window=\{size=([\dx]+)")
_LABELS = re.compile(r"dim_labels=([\w]+)_([\w]+)->([\w]+)")


def _shapes(text: str) -> list[tuple[str, tuple[int, ...]]]:
    return [(dtype, tuple(int(d) for d in dims.split(",") if d))
            for dtype, dims in _SHAPE.findall(text) if dtype in _DTYPE_BYTES]


def _nbytes(shapes) -> int:
    return sum(_DTYPE_BYTES[d] * math.prod(s) for d, s in shapes)


class Module:
    """The instructions of one compiled HLO module: result types, operands, called
    computations."""

    def __init__(self, text: str):
        self.result: dict[str, list] = {}
        self.line: dict[str, str] = {}
        self.body: dict[str, list[str]] = collections.defaultdict(list)
        computation = None
        for raw in text.splitlines():
            head = _COMPUTATION.match(raw)
            if head and " = " not in raw:
                computation = head.group(1)
                continue
            match = _INSTRUCTION.match(raw)
            if not match:
                continue
            name, rest = match.groups()
            rest = rest.split(", metadata=")[0]
            self.line[name] = rest
            opcode = _OPCODE.match(rest)
            type_text = rest[:opcode.start(1)] if opcode else rest.split(" ")[0]
            self.result[name] = _shapes(type_text)
            if computation:
                self.body[computation].append(name)

    def opcode(self, name: str) -> tuple[str, list[str]]:
        match = _OPCODE.match(self.line.get(name, ""))
        if not match:
            return "?", []
        return match.group(1), [o.strip().lstrip("%") for o in match.group(2).split(",")
                                if o.strip()]

    def bytes(self, name: str) -> int:
        """Its result's and its operands' bytes (what it reads and writes at most once)."""
        _, operands = self.opcode(name)
        return _nbytes(self.result.get(name, [])) + sum(
            _nbytes(self.result.get(o, [])) for o in operands)

    def flops(self, name: str, depth: int = 0) -> float | None:
        """The FLOPs of the products ``name`` runs (None: it runs none the text states)."""
        op, operands = self.opcode(name)
        line = self.line.get(name, "")
        if op == "dot" or (op == "custom-call" and "gemm" in line):
            out = self.result[name][0][1]
            lhs = self.result.get(operands[0], [("", ())])[0][1] if operands else ()
            match = _CONTRACTING.search(line)
            dims = [int(d) for d in re.findall(r"\d+", match.group(1))] if match else []
            return 2.0 * math.prod(out) * math.prod(lhs[d] for d in dims if d < len(lhs))
        if op == "convolution" or (op == "custom-call" and "conv" in line):
            window, labels = _WINDOW.search(line), _LABELS.search(line)
            if not (window and labels and len(operands) >= 2):
                return None
            kernel = self.result.get(operands[1], [("", ())])[0][1]
            in_features = kernel[labels.group(2).index("i")] if kernel else 0
            out = self.result[name][0][1]
            taps = math.prod(int(k) for k in window.group(1).split("x"))
            return 2.0 * math.prod(out) * taps * in_features
        called = _CALLS.findall(line)
        if not called or depth > 4:
            return None
        total = [self.flops(i, depth + 1) for c in called for i in self.body.get(c, [])]
        total = [f for f in total if f]
        return sum(total) if total else None


def trace_events(log_dir: str) -> list[dict]:
    """The complete events of the newest Perfetto trace under ``log_dir`` that name an HLO
    operation, from the device's processes where there are any (a GPU), else all."""
    files = sorted(glob.glob(os.path.join(log_dir, "**", "perfetto_trace.json.gz"),
                             recursive=True), key=os.path.getmtime)
    if not files:
        raise FileNotFoundError(f"no perfetto_trace.json.gz under {log_dir}: trace with "
                                "jax.profiler.trace(log_dir, create_perfetto_trace=True)")
    with gzip.open(files[-1]) as f:
        data = json.load(f)
    events = data["traceEvents"] if isinstance(data, dict) else data
    names = {e.get("pid"): (e.get("args") or {}).get("name", "") for e in events
             if e.get("ph") == "M" and e.get("name") == "process_name"}
    ops = [e for e in events if e.get("ph") == "X" and "hlo_op" in (e.get("args") or {})]
    device = [e for e in ops if re.search(r"GPU|TPU|/device:", names.get(e.get("pid"), ""))]
    return device or ops


def summarize(log_dir: str, texts: dict[str, str], *, steps: int, top: int = 15) -> str:
    """A Markdown table of the ``top`` operations by time over ``steps`` traced steps, and the
    totals of every traced operation."""
    modules = {name: Module(text) for name, text in texts.items()}
    time_us: collections.Counter = collections.Counter()
    calls: collections.Counter = collections.Counter()
    for e in trace_events(log_dir):
        key = (e["args"].get("hlo_module", "?").split("(")[0], e["args"]["hlo_op"])
        time_us[key] += float(e.get("dur", 0.0))
        calls[key] += 1
    total_us = sum(time_us.values()) or 1.0
    rows, total_flops = [], 0.0
    for (module, op), us in time_us.most_common():
        hlo = modules.get(module)
        flops = hlo.flops(op) if hlo else None
        nbytes = hlo.bytes(op) if hlo else 0
        per_step = calls[(module, op)] / steps
        total_flops += (flops or 0.0) * per_step
        rows.append((module, op, hlo.opcode(op)[0] if hlo else "?", us, flops, nbytes, per_step))
    out = [f"Traced operations: {len(rows)}, {total_us / 1e3 / steps:.2f} ms of operation time "
           f"per step, {total_flops / 1e9:.4g} GFLOP of counted products per step "
           f"({total_flops / (total_us / steps / 1e6) / 1e12:.3g} TFLOP/s over the operation "
           "time).", "",
           "| operation | module | kind | share of time | ms per step | GFLOP per call | "
           "TFLOP/s | MB per call | GB/s |", "|---|---|---|---:|---:|---:|---:|---:|---:|"]
    for module, op, kind, us, flops, nbytes, per_step in rows[:top]:
        seconds = us / 1e6 / max(per_step * steps, 1)  # per call
        rate = f"{flops / seconds / 1e12:.3g}" if flops and seconds else "-"
        out.append(f"| `{op}` | `{module}` | {kind} | {100 * us / total_us:.1f} % | "
                   f"{us / 1e3 / steps:.3f} | {f'{flops / 1e9:.4g}' if flops else '-'} | {rate} | "
                   f"{nbytes / 1e6:.4g} | {nbytes / seconds / 1e9 if seconds else 0:.3g} |")
    return "\n".join(out) + "\n"
