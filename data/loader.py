"""Background prefetching of training batches keyed by step (host side).

``train.py`` builds each logical step's batch as a pure function of the step (Poisson indices from
``PoissonSampler.logical_batch(step)``, clip offsets from the seed ``[seed, step, stream, j]``), so
batches can be prepared ahead in any order and the run is the same with or without prefetching.
Decoding parallelism lives in the dataset's thread pool; this only overlaps whole steps with the
device work of the current one.
"""

from __future__ import annotations

import concurrent.futures
from collections.abc import Callable
from typing import Any


class StepPrefetcher:
    """``prefetcher(step)`` returns ``load_fn(step)`` and starts the next ``depth`` steps.

    Args:
      load_fn: ``step -> batch``; must be a pure function of ``step`` (thread-safe).
      depth: steps loaded ahead (0 = load synchronously).
      num_steps: steps ``>= num_steps`` are never prefetched.

    >>> p = StepPrefetcher(lambda s: s * s, depth=2, num_steps=4)
    >>> [p(s) for s in range(4)]
    [0, 1, 4, 9]
    >>> p.close()
    """

    def __init__(self, load_fn: Callable[[int], Any], *, depth: int, num_steps: int):
        if depth < 0:
            raise ValueError(f"prefetch depth must be >= 0; got {depth}.")
        self._load = load_fn
        self._depth = depth
        self._num_steps = num_steps
        self._pool = concurrent.futures.ThreadPoolExecutor(max(depth, 1), "prefetch")
        self._pending: dict[int, concurrent.futures.Future] = {}

    def __call__(self, step: int) -> Any:
        for s in [s for s in self._pending if s < step]:  # a resumed or skipping caller
            self._pending.pop(s).cancel()
        future = self._pending.pop(step, None)
        for s in range(step + 1, min(step + 1 + self._depth, self._num_steps)):
            if s not in self._pending:
                self._pending[s] = self._pool.submit(self._load, s)
        return future.result() if future is not None else self._load(step)

    def close(self) -> None:
        for f in self._pending.values():
            f.cancel()
        self._pool.shutdown(wait=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
