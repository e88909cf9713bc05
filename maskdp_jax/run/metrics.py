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


FIRST_EXECUTION = "metrics_first_execution.jsonl"
# Differs between executions of the same step by design; every other metric must not.
NOT_REPRODUCED = frozenset({"steps_per_second"})


class ResumeDivergence(ValueError):
    """A re-executed step's metrics differ from its first execution's: re-execution was not
    bit-identical, so counting the re-executed steps once would under-count. A ``ValueError``
    like the guard's other resume refusals (another topology, another run's journal): the
    commands end it in one ``error:`` line."""


class MetricWriter:
    """Appends one JSON object per logged step and mirrors every finite scalar to TensorBoard.

    Resuming at step ``s`` keeps the rows of steps ``<= s`` in ``metrics.jsonl``; the rows of
    later steps, released by the first execution, move to ``metrics_first_execution.jsonl``
    (kept across further resumes). The resumed run re-executes those steps and logs them
    again, so ``metrics.jsonl`` ends as an uninterrupted run's would (``steps_per_second``
    aside), and :meth:`write` checks each re-executed row against the first execution's: the
    privacy ledger counts a re-executed step once only because it reproduces its first
    execution bit for bit (:mod:`maskdp_jax.run.guard`). A difference raises
    :class:`ResumeDivergence` before the row is written, so nothing of the diverging execution
    is released. ``history`` holds the kept rows. TensorBoard event files are append-only:
    there, re-executed steps appear twice (same values).
    """

    def __init__(self, workdir: str, *, tensorboard: bool = True, resume_step: int = 0):
        os.makedirs(workdir, exist_ok=True)
        self.jsonl_path = os.path.join(workdir, "metrics.jsonl")
        self.first_path = os.path.join(workdir, FIRST_EXECUTION)
        rows = read_rows(self.jsonl_path)
        self.history = [r for r in rows if r["step"] <= resume_step]
        self.first_execution = {r["step"]: r for r in read_rows(self.first_path)}
        dropped = [r for r in rows if r["step"] > resume_step
                   and r["step"] not in self.first_execution]
        if dropped:
            self.first_execution.update({r["step"]: r for r in dropped})
            atomic.write(self.first_path, "".join(
                json.dumps(self._row(step, self.first_execution[step])) + "\n"
                for step in sorted(self.first_execution)))
        atomic.write(self.jsonl_path,
                     "".join(json.dumps(self._row(r["step"], r)) + "\n" for r in self.history))
        self._jsonl = open(self.jsonl_path, "a")  # noqa: SIM115 - closed in close()
        self._tb = SummaryWriter(os.path.join(workdir, "tb")) if tensorboard else None

    def check_reproduced(self, step: int, scalars: dict[str, float]) -> None:
        """Refuse a re-executed ``step`` whose metrics differ from its first execution's.

        Raises:
          ResumeDivergence: names the step, the metric and both values, and what to do.
        """
        first = self.first_execution.get(step)
        if first is None:
            return
        for name, value in scalars.items():
            if name in NOT_REPRODUCED or name not in first:
                continue
            before = first[name]
            if before != value and not (math.isnan(before) and math.isnan(value)):
                raise ResumeDivergence(
                    f"step {step}, re-executed after the resume, does not reproduce its first "
                    f"execution ({name}: {before!r} then {value!r}). The privacy ledger counts a "
                    "re-executed step once only because it repeats its first execution bit for "
                    "bit; this one did not, so the run stops before anything of the second "
                    "execution is released (the journal's ε covers what the first released, "
                    f"its rows are in {FIRST_EXECUTION}). This machine does not re-execute "
                    "deterministically (on a GPU set XLA_FLAGS=--xla_gpu_deterministic_ops=true)"
                    "; to go on, train a new run in a new --workdir (it spends its own ε).")

    @staticmethod
    def _row(step: int, scalars: dict) -> dict:
        row = {"step": int(step)}
        row.update({k: (v if math.isfinite(v) else str(v)) for k, v in scalars.items()
                    if k != "step"})
        return row

    def write(self, step: int, scalars: dict[str, float]) -> None:
        """Append the row of ``step`` (a re-executed step is checked first:
        :meth:`check_reproduced`)."""
        self.check_reproduced(step, scalars)
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


def flat_hparams(tree: dict, prefix: str = "") -> dict[str, bool | int | float | str]:
    """A nested config dict as TensorBoard hparams: ``"privacy.delta": 1e-05``; values other than
    bool, int, finite float and str (tuples, None, ε = ∞ of a non-private run) as their ``repr``,
    which TensorBoard shows as written instead of warning about a non-finite number.

    >>> flat_hparams({"privacy": {"delta": 1e-05, "target_epsilon": float("inf")}, "k": (1, 2)})
    {'privacy.delta': 1e-05, 'privacy.target_epsilon': 'inf', 'k': '(1, 2)'}
    """
    flat: dict[str, bool | int | float | str] = {}
    for key, value in tree.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            flat.update(flat_hparams(value, prefix=f"{name}."))
        elif isinstance(value, bool | int | str) or (isinstance(value, float)
                                                     and math.isfinite(value)):
            flat[name] = value
        else:
            flat[name] = repr(value)
    return flat


def write_summary(workdir: str, *, step: int, scalars: dict[str, float],
                  hparams: dict[str, bool | int | float | str]) -> None:
    """The run's outcome in ``<workdir>/tb``: ``scalars`` (test accuracy, the view diagnostics)
    at the last ``step``, and ``hparams`` (the configuration) with those scalars as the HPARAMS
    tab's metrics (in ``tb/hparams``: a writer of its own, which must not share the scalars'
    events file), so runs can be compared by their settings and results, not only by their
    loss curves. Non-finite scalars are left out (TensorBoard cannot draw them)."""
    finite = {name: float(v) for name, v in scalars.items() if math.isfinite(v)}
    with SummaryWriter(os.path.join(workdir, "tb")) as tb:
        for name, value in finite.items():
            tb.add_scalar(name, value, step)
        tb.add_hparams(hparams, {f"hparam/{name}": v for name, v in finite.items()},
                       name="hparams", global_step=step)


@contextlib.contextmanager
def progress_bar(total: int, desc: str) -> Iterator[Callable[[int, int], None]]:
    """A tqdm bar over ``total`` videos, yielding the ``progress(done, total)`` callback that
    :func:`maskdp_jax.data.store.prepare` and :func:`maskdp_jax.run.features.build` call."""
    with tqdm(total=total, desc=desc, unit="video") as bar:
        def progress(done: int, total: int) -> None:
            bar.n = done
            bar.refresh()

        yield progress
