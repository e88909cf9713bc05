"""Data parallelism over a 1-D device mesh, on one host or many (``jax.distributed``).

Layout. The mesh has one axis, :data:`DATA_AXIS`. Every physical batch ``[P, ...]`` is split along
its example axis over the mesh (``P`` must be a multiple of the number of devices); parameters,
optimiser state, the accumulator of clipped sums and the PRNG key are replicated.

Privacy. The DP step needs, per logical batch, ``sum_i w_i clip_C(g_i)`` over *all* examples of
all devices, and one noise draw. :func:`shard_accumulation` therefore computes each device's
clipped sum with the per-example gradients of *its own* examples only, all-reduces the sums
(``psum``), and leaves the noise to the replicated finalisation, which draws it from the replicated
key: every replica adds the same noise and applies the same update, and the result equals the
single-device result for the same key and batch.

The trap this module exists to avoid: inside ``shard_map``, the parameters are *invariant* over the
data axis (the same value on every device). Differentiating w.r.t. an invariant value makes JAX
insert a ``psum`` into the transpose, so ``vmap(grad)`` would return, for example ``i`` on device
``d``, the sum over devices of the ``i``-th per-example gradients -- mixing examples of different
videos *before* clipping, which breaks the sensitivity bound. The trainable parameters are cast
to *varying* (``jax.lax.pcast(..., to="varying")``) before the gradient is taken, so each device
differentiates its own examples only; the sums are then all-reduced explicitly.

Multi-host: every process runs the same program (JAX's multi-controller runtime). The Poisson
draw is a pure function of ``(seed, step, stream)`` (:mod:`maskdp_jax.core.sampling`), so all hosts
cut the same physical batches; each host loads only its rows (:func:`process_rows`) and
:func:`global_batch` assembles the global array.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import numpy as np
from jax.experimental import multihost_utils
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

PyTree = Any
#: Name of the mesh axis over which the rows of a physical batch are split.
DATA_AXIS = "data"


def make_mesh(devices: list | None = None) -> Mesh:
    """A 1-D mesh named :data:`DATA_AXIS` over ``devices`` (default: all devices of all hosts)."""
    devices = jax.devices() if devices is None else list(devices)
    if not devices:
        raise ValueError("make_mesh needs at least one device.")
    return Mesh(np.asarray(devices), (DATA_AXIS,))


def check_divisible(physical_batch_size: int, mesh: Mesh) -> None:
    """Raise unless the physical batch splits evenly over the mesh (static shapes per device)."""
    n = mesh.size
    if physical_batch_size % n:
        raise ValueError(
            f"physical_batch_size={physical_batch_size} must be a multiple of the number of "
            f"devices ({n}) for data parallelism; set --config.physical_batch_size to a multiple "
            f"of {n}."
        )


def replicate(tree: PyTree, mesh: Mesh) -> PyTree:
    """Place host values (the same on every process) replicated on every device of ``mesh``."""
    sharding = NamedSharding(mesh, P())
    if jax.process_count() == 1:
        return jax.device_put(tree, sharding)

    def one(x):
        if is_prng_key(x):  # replicate its data, re-wrap
            return jax.random.wrap_key_data(one(jax.random.key_data(x)))
        return jax.make_array_from_process_local_data(sharding, np.asarray(x))

    return jax.tree.map(one, tree)


def is_prng_key(x: Any) -> bool:
    """Whether ``x`` is a typed PRNG key array (the mechanism's noise key): it has no NumPy
    dtype, so host copies and checkpoints carry its ``key_data``."""
    return isinstance(x, jax.Array) and jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key)


def to_host(tree: PyTree) -> PyTree:
    """NumPy copy of a tree of replicated (or single-device) arrays, valid on every process."""
    def one(x):
        if is_prng_key(x):  # no NumPy dtype: copy its data, re-wrap
            return jax.random.wrap_key_data(one(jax.random.key_data(x)))
        if isinstance(x, jax.Array) and not x.is_fully_addressable:
            return np.asarray(x.addressable_data(0))
        return np.asarray(x)

    return jax.tree.map(one, tree)


def process_rows(physical_batch_size: int, mesh: Mesh) -> slice:
    """The rows of every physical batch that this process loads (all rows on a single host).

    Rows are assigned to devices in mesh order, so a process owns the contiguous rows of its
    devices. Assumes each process's devices are contiguous in the mesh (true for
    :func:`make_mesh` with ``jax.devices()``).
    """
    check_divisible(physical_batch_size, mesh)
    per_device = physical_batch_size // mesh.size
    mine = [i for i, d in enumerate(mesh.devices.flat) if d.process_index == jax.process_index()]
    if mine != list(range(mine[0], mine[-1] + 1)):
        raise ValueError("This process's devices are not contiguous in the mesh.")
    return slice(mine[0] * per_device, (mine[-1] + 1) * per_device)


def global_batch(local: dict[str, np.ndarray], mesh: Mesh, physical_batch_size: int) -> dict:
    """Assemble a physical batch sharded over :data:`DATA_AXIS` from this process's rows.

    Args:
      local: this process's rows (``process_rows``) of each array, ``[P_local, ...]``.
      mesh: the data mesh.
      physical_batch_size: P, the global number of rows.
    """
    sharding = NamedSharding(mesh, P(DATA_AXIS))
    return {
        k: jax.make_array_from_process_local_data(
            sharding, np.asarray(v), (physical_batch_size, *np.shape(v)[1:])
        )
        for k, v in local.items()
    }


def _to_varying(tree: PyTree) -> PyTree:
    return jax.tree.map(lambda x: jax.lax.pcast(x, DATA_AXIS, to="varying"), tree)


def shard_accumulation(
    accumulate: Callable[..., Any], zeros: Callable[[PyTree], Any], mesh: Mesh,
    *, cast_to_varying: bool = True,
) -> Callable[..., Any]:
    """Data-parallel version of ``accumulate(acc, trainable, frozen, batch) -> acc``.

    Args:
      accumulate: adds one physical batch's contribution to an accumulator (single device).
      zeros: ``zeros(trainable) -> accumulator`` of zeros.
      mesh: the data mesh; ``batch`` leaves are sharded on axis 0, everything else replicated.
      cast_to_varying: must stay True; False reproduces the per-example-gradient mixing trap and
        exists only so that a test can prove it would be caught.

    Returns:
      ``f(acc, trainable, frozen, batch) -> acc`` (to be jitted), where the contribution of all
      devices' examples is all-reduced before being added to the replicated ``acc``.
    """

    def local(trainable, frozen, batch):
        start = _to_varying(zeros(trainable))  # each device sums its own examples from zero
        if cast_to_varying:
            trainable = _to_varying(trainable)
        contribution = accumulate(start, trainable, frozen, batch)
        return jax.lax.psum(contribution, DATA_AXIS)

    sharded = jax.shard_map(
        local, mesh=mesh, in_specs=(P(), P(), P(DATA_AXIS)), out_specs=P()
    )

    def accumulate_sharded(acc, trainable, frozen, batch):
        return jax.tree.map(lambda a, c: a + c, acc, sharded(trainable, frozen, batch))

    return accumulate_sharded


def any_process(flag: bool) -> bool:
    """Whether ``flag`` is True on at least one process; the same answer on every process.

    A collective when there are several processes: every process must call it at the same point
    of the program (e.g. once per training step). With one process it returns ``flag`` without
    any communication. Used for preemption: each host sees SIGTERM at its own step, and a host
    that entered the (collective) checkpoint save while the others entered the next step's
    all-reduce would deadlock; agreeing on the flag first makes them all save at the same step.
    """
    if jax.process_count() == 1:
        return bool(flag)
    flags = multihost_utils.process_allgather(np.asarray(flag, np.int32))
    return bool(np.any(flags))


def initialize_distributed(
    *, coordinator_address: str = "", num_processes: int = 1, process_id: int = 0,
    cpu_collectives: str = "",
) -> None:
    """Join a multi-host run (``jax.distributed.initialize``); call before any JAX computation.

    Args:
      coordinator_address: ``host:port`` of process 0, reachable by every process; "" lets JAX
        detect the cluster (TPU pod slices, SLURM, Open MPI), then the other two are ignored.
      num_processes: number of processes (hosts) in the run.
      process_id: this process's index in ``[0, num_processes)``.
      cpu_collectives: for CPU devices only: ``"gloo"`` enables cross-process collectives.
    """
    if cpu_collectives:
        jax.config.update("jax_cpu_collectives_implementation", cpu_collectives)
    if not coordinator_address:
        jax.distributed.initialize()
        return
    if ":" not in coordinator_address:
        raise ValueError(
            f"coordinator_address must be 'host:port'; got {coordinator_address!r}."
        )
    if not 0 <= process_id < num_processes:
        raise ValueError(
            f"process_id must be in [0, num_processes={num_processes}); got {process_id}."
        )
    jax.distributed.initialize(
        coordinator_address=coordinator_address, num_processes=num_processes,
        process_id=process_id,
    )
