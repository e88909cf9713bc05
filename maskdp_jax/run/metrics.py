"""Training metrics to JSON Lines (``metrics.jsonl``) and TensorBoard scalars (``tb/``), and
the progress bar of the commands that decode a dataset once (clip stores, the feature cache).

A row reaches the writer only through :meth:`maskdp_jax.run.guard.PrivacyGuard.release`, i.e. after
the journal covers the steps it was computed from.

Only metrics that the trainer has already judged printable are written here: by default those
computed from public data (public-view loss) and the accountant's ε. Metrics computed from private
data are not differentially private; they reach this writer only when the user opts in, and their
names then carry ``(non-DP)``.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
from collections.abc import Callable, Iterator

from tensorboardX import SummaryWriter
from tqdm import tqdm

from maskdp_jax.data import atomic


def _number(value):
    """A JSON value back to a float (non-finite floats are stored as strings)."""
    return float(value) if isinstance(value, str) else value


def read_rows(path: str) -> list[dict]:
    """The rows of a ``metrics.jsonl``; a last line cut short by a crash is dropped."""
    rows = []
    if not os.path.isfile(path):
        return rows
    with open(path) as f:
        for line in f:
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                break  # a partial last line: the process died while writing it
            rows.append({k: _number(v) for k, v in row.items()})
    return rows


class MetricWriter:
    """Appends one JSON object per logged step and mirrors every finite scalar to TensorBoard.

    Resuming at step ``s`` keeps the rows of steps ``<= s`` and drops those of later steps: the
    resumed run re-executes those steps (bit-identically) and logs them again, so the file ends as
    an uninterrupted run's would (``steps_per_second`` aside). ``history`` holds the kept rows.
    TensorBoard event files are append-only: there, re-executed steps appear twice (same values).
    """

    def __init__(self, workdir: str, *, tensorboard: bool = True, resume_step: int = 0):
        os.makedirs(workdir, exist_ok=True)
        self.jsonl_path = os.path.join(workdir, "metrics.jsonl")
        self.history = [r for r in read_rows(self.jsonl_path) if r["step"] <= resume_step]
        atomic.write(self.jsonl_path,
                     "".join(json.dumps(self._row(r["step"], r)) + "\n" for r in self.history))
        self._jsonl = open(self.jsonl_path, "a")  # noqa: SIM115 - closed in close()
        self._tb = SummaryWriter(os.path.join(workdir, "tb")) if tensorboard else None

    @staticmethod
    def _row(step: int, scalars: dict) -> dict:
        row = {"step": int(step)}
        row.update({k: (v if math.isfinite(v) else str(v)) for k, v in scalars.items()
                    if k != "step"})
        return row

    def write(self, step: int, scalars: dict[str, float]) -> None:
        self._jsonl.write(json.dumps(self._row(step, scalars)) + "\n")
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


@contextlib.contextmanager
def progress_bar(total: int, desc: str) -> Iterator[Callable[[int, int], None]]:
    """A tqdm bar over ``total`` videos, yielding the ``progress(done, total)`` callback that
    :func:`maskdp_jax.data.store.prepare` and :func:`maskdp_jax.run.features.build` call."""
    with tqdm(total=total, desc=desc, unit="video") as bar:
        def progress(done: int, total: int) -> None:
            bar.n = done
            bar.refresh()

        yield progress
