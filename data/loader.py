"""Background loading of training batches keyed by step (host side), with grain.

``train.py`` builds each logical step's batch as a pure function of the step (Poisson indices from
``PoissonSampler.logical_batch(step)``, clip offsets from the seed ``[seed, step, stream, j]``), so
batches can be prepared ahead in any order and the run is the same with or without prefetching.
Decoding parallelism lives in the dataset's thread pool; this overlaps whole steps with the
device work of the current one.

The steps are a grain ``MapDataset`` (``range(num_steps).map(load_fn)``, index-based and
deterministic) read through grain's prefetching iterator (``depth`` threads and steps ahead).
grain's iterator state is ``{"next_index": step}``: the checkpoint's step *is* that state, so a
resumed run sets it from the step it resumes at and reads the same batches (resume is tested
bit-exact end to end). The sampler stays the one source of batch membership: grain only decides
when a step's batch is built, never which videos it holds.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import grain


class StepPrefetcher:
    """``prefetcher(step)`` returns ``load_fn(step)``, the next ``depth`` steps being loaded by
    grain's threads.

    Args:
      load_fn: ``step -> batch``; must be a pure function of ``step`` (thread-safe).
      depth: steps loaded ahead (0 = load synchronously, no grain iterator).
      num_steps: steps ``>= num_steps`` are never loaded.

    Steps are read in order; asking for another step than the next (a resumed run, a caller
    that skips) restarts grain's iterator at that step (``set_state``).

    >>> p = StepPrefetcher(lambda s: s * s, depth=2, num_steps=4)
    >>> [p(s) for s in range(4)]
    [0, 1, 4, 9]
    >>> p.state()
    {'next_index': 4}
    >>> p.close()
    """

    def __init__(self, load_fn: Callable[[int], Any], *, depth: int, num_steps: int):
        if depth < 0:
            raise ValueError(f"prefetch depth must be >= 0; got {depth}.")
        self._load = load_fn
        self._depth = depth
        self._steps = grain.MapDataset.range(num_steps).map(load_fn)
        self._iter = None
        self._next = None

    def __call__(self, step: int) -> Any:
        if self._depth == 0:
            self._next = step + 1
            return self._load(step)
        if self._iter is None or step != self._next:
            self.close()
            self._iter = iter(self._steps.to_iter_dataset(grain.ReadOptions(
                num_threads=self._depth, prefetch_buffer_size=self._depth)))
            self._iter.set_state({"next_index": step})
        batch = next(self._iter)
        self._next = step + 1
        return batch

    def state(self) -> dict[str, int]:
        """grain's iterator state: the next step to be read (``{"next_index": step}``)."""
        return {"next_index": self._next or 0}

    def close(self) -> None:
        if self._iter is not None:
            self._iter.close()
            self._iter = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
