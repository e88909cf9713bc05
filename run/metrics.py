"""Training metrics to JSON Lines (``metrics.jsonl``) and TensorBoard scalars (``tb/``).

A row reaches the writer only through :meth:`run.guard.PrivacyGuard.release`, i.e. after the
journal covers the steps it was computed from.

Only metrics that the trainer has already judged printable are written here: by default those
computed from public data (public-view loss) and the accountant's ε. Metrics computed from private
data are not differentially private; they reach this writer only when the user opts in, and their
names then carry ``(non-DP)``.
"""

from __future__ import annotations

import json
import math
import os

from tensorboardX import SummaryWriter


class MetricWriter:
    """Appends one JSON object per logged step and mirrors every finite scalar to TensorBoard."""

    def __init__(self, workdir: str, *, tensorboard: bool = True):
        os.makedirs(workdir, exist_ok=True)
        self.jsonl_path = os.path.join(workdir, "metrics.jsonl")
        self._jsonl = open(self.jsonl_path, "a")  # noqa: SIM115 - closed in close()
        self._tb = SummaryWriter(os.path.join(workdir, "tb")) if tensorboard else None

    def write(self, step: int, scalars: dict[str, float]) -> None:
        row = {"step": int(step)}
        row.update({k: (v if math.isfinite(v) else str(v)) for k, v in scalars.items()})
        self._jsonl.write(json.dumps(row) + "\n")
        self._jsonl.flush()
        if self._tb is not None:
            for name, value in scalars.items():
                if math.isfinite(value):
                    self._tb.add_scalar(name, value, step)

    def close(self) -> None:
        self._jsonl.close()
        if self._tb is not None:
            self._tb.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
