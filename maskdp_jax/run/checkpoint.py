"""Checkpoints with orbax: the train state and a JSON meta, written atomically, the last k kept.

This module only stores and loads; what goes into the meta (ledger, randomness, identity) and
when a checkpoint may be written or resumed is decided by
:class:`maskdp_jax.run.guard.PrivacyGuard`.

orbax writes each checkpoint into a temporary directory and renames it when complete (atomic), and
keeps the last ``keep``. **Checkpoints are private**: in ``secret`` randomness their meta holds the
secret from which the noise and the private batches derive (see :mod:`maskdp_jax.core.randomness`).
They therefore live apart from what a run publishes (report, metrics, final parameters): in
``<workdir>/private/checkpoints``, next to a ``DO_NOT_SHARE.txt`` that says why.
"""

from __future__ import annotations

import errno
import os
import shutil
import time
from collections.abc import Mapping
from typing import Any

import jax
import numpy as np
import orbax.checkpoint as ocp
from flax import serialization

from maskdp_jax.core import parallel

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


def _key_data(tree: PyTree) -> PyTree:
    """``tree`` with every typed PRNG key (the mechanism's base noise key) as its uint32 data:
    what orbax can write; :meth:`Checkpointer.restore` wraps it back."""
    return jax.tree.map(
        lambda x: np.asarray(jax.random.key_data(x)) if parallel.is_prng_key(x) else x, tree)


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
        self._keep = keep
        if jax.process_index() == 0:  # orbax's primary host; the others only read
            self._remove_partial_saves()
        self._manager = self._open_manager()

    def _open_manager(self) -> ocp.CheckpointManager:
        # Not orbax's cleanup_tmp_directories: see _remove_partial_saves.
        return ocp.CheckpointManager(
            self.directory,
            options=ocp.CheckpointManagerOptions(max_to_keep=self._keep, create=True),
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
        previous = self._manager.latest_step()
        try:
            notice = os.path.join(os.path.dirname(self.directory), "DO_NOT_SHARE.txt")
            if not os.path.isfile(notice):
                with open(notice, "w") as f:
                    f.write(NOTICE)
            self._manager.save(step, args=ocp.args.Composite(
                state=ocp.args.StandardSave(_key_data(serialization.to_state_dict(state))),
                meta=ocp.args.JsonSave(dict(meta)),
            ), force=True)
            self._manager.wait_until_finished()
        except Exception as e:
            self._remove_partial_saves()
            if not _out_of_space(e):
                raise
            kept = "no earlier checkpoint" if previous is None else f"step {previous}"
            raise OSError(
                errno.ENOSPC,
                f"No space left to write checkpoint step {step} in {self.directory} ({e}). "
                f"The last good checkpoint ({kept}) and the privacy journal are intact and the "
                "partial files were removed: free space, then run the same command again to "
                "resume.",
            ) from e

    def _remove_partial_saves(self) -> None:
        """Remove the temporary directories of saves that did not complete (failed, or killed in
        an earlier run), before the manager is opened and after a failed save.

        The names are orbax's (a local path: a directory, not a link, whose name holds
        ``.orbax-checkpoint-tmp``); nothing else is touched. This is done here, synchronously,
        rather than by orbax's ``cleanup_tmp_directories=True`` (orbax 0.12.8), which deletes
        them in a background thread that only ``save()`` waits for: ``close()`` does not, so a
        manager that is opened and closed (``read_latest_meta``, the start-up probe) can leave
        them in place, or have the deletion fail against the next manager's, and that failure
        is re-raised by the first ``save()``.
        """
        if not os.path.isdir(self.directory):
            return
        for entry in os.scandir(self.directory):
            if ocp.utils.TMP_DIR_SUFFIX in entry.name and entry.is_dir(follow_symlinks=False):
                shutil.rmtree(entry.path, ignore_errors=True)

    def restore(self, step: int, *, like: PyTree) -> tuple[PyTree, dict]:
        """``(state, meta)`` of the checkpoint at ``step``.

        Args:
          step: a step with a complete checkpoint.
          like: a state with the run's structure (host arrays), used as the restore target.
        """
        like_dict = serialization.to_state_dict(like)
        restored = self._manager.restore(step, args=ocp.args.Composite(
            state=ocp.args.StandardRestore(_key_data(like_dict)),
            meta=ocp.args.JsonRestore(),
        ))
        state = jax.tree.map(lambda template, x: jax.random.wrap_key_data(x)
                             if parallel.is_prng_key(template) else x,
                             like_dict, restored["state"])
        return serialization.from_state_dict(like, state), dict(restored["meta"])

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

    def _read_whole(self, step: int) -> tuple[dict | None, str | None]:
        """``(meta, None)`` of checkpoint ``step``, or ``(None, why it cannot be restored)``
        (its meta or any array unreadable). Reads it whole, without a template, so a damaged
        file is found before the model is built."""
        try:
            restored = self._manager.restore(step, args=ocp.args.Composite(
                state=ocp.args.StandardRestore(), meta=ocp.args.JsonRestore()))
            meta = dict(restored["meta"])
            if int(meta["step"]) != step:
                return None, f"its meta says step {meta['step']}"
        except Exception as e:  # noqa: BLE001 - any failure to read is reported, with its text
            return None, f"{type(e).__name__}: {str(e).splitlines()[0][:300] if str(e) else ''}"
        return meta, None

    def newest_intact_meta(self, *, fall_back: bool = True) -> tuple[dict | None, list[str]]:
        """``(meta of the newest readable checkpoint or None, notes)``.

        Newer checkpoints that cannot be read (garbage in their meta, truncated array files)
        are moved to ``<private>/corrupt/`` (kept, for inspection) and named in ``notes``; the
        run then resumes from the newest intact one. Falling back never under-counts privacy:
        the steps after it are re-executed bit-identically (same seeds, noise key and state;
        :mod:`maskdp_jax.run.guard`) and the journal keeps the longer history.

        Args:
          fall_back: False (a multi-process run: its processes must not move shared files
            independently) refuses instead of falling back, naming what to move aside.

        Raises:
          ValueError: checkpoints exist but none can be read (each named with its problem), or
            the newest cannot and ``fall_back`` is False.
        """
        notes, problems = [], []
        for step in sorted(self._manager.all_steps(), reverse=True):
            meta, problem = self._read_whole(step)
            if problem is None and problems and not fall_back:
                raise ValueError(
                    "Unreadable checkpoint(s) in a multi-process run: "
                    + "; ".join(f"step {s}: {p}" for s, p in problems)
                    + f". Move them out of {self.directory} (the newest intact one is step "
                    f"{step}) and run the same command again."
                )
            if problem is None:
                if problems:
                    notes += self._move_aside(problems)
                    notes.append(f"resuming from the newest intact checkpoint, step {step}; "
                                 "the steps after it are re-executed and counted once.")
                return meta, notes
            problems.append((step, problem))
        if problems:
            raise ValueError(
                f"No checkpoint in {self.directory} can be read: "
                + "; ".join(f"step {s}: {p}" for s, p in problems)
                + ". Restore them from a backup, or start over in a fresh --workdir (the privacy "
                "spent by this run is in its journal, privacy_ledger.json)."
            )
        return None, notes

    def _move_aside(self, problems: list[tuple[int, str]]) -> list[str]:
        corrupt = os.path.join(os.path.dirname(self.directory), "corrupt")
        os.makedirs(corrupt, exist_ok=True)
        notes = []
        for step, problem in problems:
            dst = os.path.join(corrupt, f"{step}-{time.strftime('%Y%m%d-%H%M%S')}")
            os.rename(os.path.join(self.directory, str(step)), dst)
            notes.append(f"checkpoint step {step} in {self.directory} is unreadable ({problem}); "
                         f"moved to {dst}")
        self._manager.close()
        self._manager = self._open_manager()
        return notes

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


def _out_of_space(error: BaseException) -> bool:
    """Whether a failed save ran out of disk (ENOSPC, or tensorstore's RESOURCE_EXHAUSTED)."""
    while error is not None:
        if getattr(error, "errno", None) in (errno.ENOSPC, errno.EDQUOT):
            return True
        if any(m in str(error) for m in ("RESOURCE_EXHAUSTED", "No space left on device")):
            return True
        error = error.__cause__ or error.__context__
    return False


def read_latest_meta(workdir: str) -> dict | None:
    """:meth:`Checkpointer.latest_meta` of ``workdir`` (opens and closes a manager)."""
    ckpt = Checkpointer(workdir, keep=1)  # max_to_keep applies on save only; nothing is saved
    try:
        return ckpt.latest_meta()
    finally:
        ckpt.close()


def export_params(workdir: str, dst: str, *, drop_head: bool = False) -> int:
    """Write the parameters of ``workdir``'s newest checkpoint as a ``model.init_from``
    checkpoint at ``dst`` (:func:`maskdp_jax.models.convert.save_params`); the number of parameters.
    ``drop_head``: leave the classifier (``head``) out, so a run starting from it learns a fresh
    one (as from Kinetics weights for another label set).

    Only the parameters leave: never the optimiser state or the meta (which holds the noise
    secret). They are what the run's report publishes anyway (the final model), under the run's
    guarantee. The use here is public pre-training: a non-private run on public data whose
    weights another run fine-tunes privately, as the papers fine-tune Kinetics-400 weights.

    Raises:
      FileNotFoundError: the workdir has no checkpoint.
      FileExistsError: ``dst`` exists.
    """
    from maskdp_jax.core import partition
    from maskdp_jax.models import convert

    if os.path.exists(dst):
        raise FileExistsError(f"{dst!r} already exists; choose a new --dst.")
    ckpt = Checkpointer(workdir, keep=1)
    try:
        latest = ckpt.read_latest()
    finally:
        ckpt.close()
    if latest is None:
        raise FileNotFoundError(f"{workdir!r} has no checkpoint to export (a run writes them in "
                                f"{checkpoint_directory(workdir)}).")
    step, state, meta = latest
    params = partition.merge(state["trainable"], state["frozen"])
    if drop_head:
        params = {k: v for k, v in params.items() if k != "head"}
    model = dict(meta["config"]["model"])
    convert.save_params(dst, params, info={"source": os.path.abspath(workdir), "step": step,
                                           "preset": model["name"],
                                           "head": "dropped" if drop_head else "kept"})
    return sum(int(getattr(x, "size", 1)) for x in jax.tree.leaves(params))
