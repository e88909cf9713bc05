"""Checkpoints with orbax: the train state and a JSON meta, written atomically, the last k kept.

This module only stores and loads; what goes into the meta (ledger, randomness, identity) and
when a checkpoint may be written or resumed is decided by :class:`run.guard.PrivacyGuard`.

orbax writes each checkpoint into a temporary directory and renames it when complete (atomic), and
keeps the last ``keep``. **Checkpoints are private**: in ``secret`` randomness their meta holds the
secret from which the noise and the private batches derive (see :mod:`maskdp_jax.randomness`).
They therefore live apart from what a run publishes (report, metrics, final parameters): in
``<workdir>/private/checkpoints``, next to a ``DO_NOT_SHARE.txt`` that says why.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import orbax.checkpoint as ocp
from flax import serialization

PyTree = Any

PRIVATE_DIR = "private"
NOTICE = (
    "Everything in this directory is private. The checkpoints hold, in secret randomness (the "
    "default), the secret from which the run's DP noise and private batches derive: whoever has "
    "them can recompute the noise, and the privacy guarantee does not hold against them. Keep "
    "this directory as private as the training data; publish report.json / report.md, the "
    "metrics and the final parameters instead.\n"
)


def checkpoint_directory(workdir: str) -> str:
    """Where the checkpoints of a run in ``workdir`` live: ``<workdir>/private/checkpoints``."""
    return os.path.abspath(os.path.join(workdir, PRIVATE_DIR, "checkpoints"))


def _check_no_legacy_checkpoints(workdir: str, directory: str) -> None:
    """Checkpoints of runs before the private directory sat in ``<workdir>/checkpoints``; do not
    silently start over beside them."""
    legacy = os.path.join(os.path.abspath(workdir), "checkpoints")
    if os.path.isdir(legacy) and os.listdir(legacy):
        raise ValueError(
            f"{legacy} holds checkpoints of an earlier version, which kept them beside the "
            f"published outputs. Move them to the private directory to resume "
            f"(mkdir -p {os.path.dirname(directory)} && mv {legacy} {directory}), or use a "
            "fresh --workdir."
        )


class Checkpointer:
    """orbax-backed checkpoints of one run in ``<workdir>/private/checkpoints``.

    Args:
      workdir: the run's output directory.
      keep: number of most recent checkpoints kept (>= 1).
    """

    def __init__(self, workdir: str, *, keep: int):
        if keep < 1:
            raise ValueError(f"checkpoint.keep must be >= 1; got {keep}.")
        self.directory = checkpoint_directory(workdir)
        _check_no_legacy_checkpoints(workdir, self.directory)
        self._manager = ocp.CheckpointManager(
            self.directory,
            options=ocp.CheckpointManagerOptions(max_to_keep=keep, create=True),
        )

    def latest_step(self) -> int | None:
        return self._manager.latest_step()

    def save(self, state: PyTree, *, step: int, meta: Mapping[str, Any]) -> None:
        """Write a checkpoint for ``step`` (blocking, so a kill afterwards cannot lose it).

        Args:
          state: the TrainState after ``step`` steps (host arrays).
          step: number of logical steps executed.
          meta: JSON-serialisable meta (may hold the run's secret: checkpoints are private).
        """
        notice = os.path.join(os.path.dirname(self.directory), "DO_NOT_SHARE.txt")
        if not os.path.isfile(notice):
            with open(notice, "w") as f:
                f.write(NOTICE)
        self._manager.save(step, args=ocp.args.Composite(
            state=ocp.args.StandardSave(serialization.to_state_dict(state)),
            meta=ocp.args.JsonSave(dict(meta)),
        ), force=True)
        self._manager.wait_until_finished()

    def restore(self, step: int, *, like: PyTree) -> tuple[PyTree, dict]:
        """``(state, meta)`` of the checkpoint at ``step``.

        Args:
          step: a step with a complete checkpoint.
          like: a state with the run's structure (host arrays), used as the restore target.
        """
        restored = self._manager.restore(step, args=ocp.args.Composite(
            state=ocp.args.StandardRestore(serialization.to_state_dict(like)),
            meta=ocp.args.JsonRestore(),
        ))
        return serialization.from_state_dict(like, restored["state"]), dict(restored["meta"])

    def restore_latest(self, like: PyTree) -> tuple[PyTree, dict] | None:
        """``(state, meta)`` of the newest complete checkpoint, or None if there is none."""
        step = self._manager.latest_step()
        return None if step is None else self.restore(step, like=like)

    def read_latest(self) -> tuple[int, dict, dict] | None:
        """``(step, state as nested dict of numpy arrays, meta)`` of the newest checkpoint,
        without a template (for inspection, tests and exporting the final parameters), or
        None."""
        step = self._manager.latest_step()
        if step is None:
            return None
        restored = self._manager.restore(step, args=ocp.args.Composite(
            state=ocp.args.StandardRestore(), meta=ocp.args.JsonRestore(),
        ))
        return step, restored["state"], dict(restored["meta"])

    def latest_meta(self) -> dict | None:
        """``meta`` of the newest checkpoint, or None. Reads no arrays, so a resume can be checked
        before the model is built."""
        step = self._manager.latest_step()
        if step is None:
            return None
        restored = self._manager.restore(step, args=ocp.args.Composite(
            meta=ocp.args.JsonRestore(),
        ))
        return dict(restored["meta"])

    def close(self) -> None:
        self._manager.close()


def read_latest_meta(workdir: str) -> dict | None:
    """:meth:`Checkpointer.latest_meta` of ``workdir`` (opens and closes a manager)."""
    ckpt = Checkpointer(workdir, keep=1)  # max_to_keep applies on save only; nothing is saved
    try:
        return ckpt.latest_meta()
    finally:
        ckpt.close()
