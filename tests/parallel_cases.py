"""Scenarios for tests/test_maskdp_jax_parallel.py, run in subprocesses owning several CPU devices.

    python tests/parallel_cases.py devices OUT.json
        (with XLA_FLAGS=--xla_force_host_platform_device_count=8): for each mode, the same steps on
        1 device and on an 8-device mesh; the private modes again on 8 devices with
        microbatch_size set; plus the pcast trap (params left invariant). Also
        writes OUT.json.reference.npz, the 1-device maskdp result the multi-process run must match.
    python tests/parallel_cases.py process PID NPROC PORT OUT.npz
        (2 CPU devices per process): one process of a jax.distributed run over loopback (gloo).
    python tests/parallel_cases.py preempt PID NPROC PORT OUT.json
        (1 CPU device per process): ``parallel.any_process`` when only process 1 saw SIGTERM.

Not collected by pytest (no ``test_`` prefix); the scenario helpers are also imported by the test.
"""

from __future__ import annotations

import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

PHYSICAL = 8
STEPS = 2


def setup(mode: str, microbatch_size: int | None = None):
    """Tiny model, optimiser, step config and initial state of one mode (deterministic)."""
    import jax
    import optax
    from conftest import PATCH_STRIDE, TinyVideoNet

    from maskdp_jax.core.mechanism import Mechanism
    from maskdp_jax.core.plan import PrivacyPlan
    from maskdp_jax.core.randomness import Randomness
    from maskdp_jax.core.tokenizer import Tokenizer
    from maskdp_jax.core.train_step import PixelViews, TrainState

    model = TinyVideoNet()
    params = model.init(jax.random.key(0), np.zeros((1, 4, 16, 16, 3), np.float32))["params"]
    tx = optax.sgd(0.2, momentum=0.9)
    # A small clip norm so that nearly every private example is clipped: mixing per-example
    # gradients across devices before clipping would change the result.
    plan = PrivacyPlan(mode=mode, num_examples=10**6, batch_size=12, steps=STEPS,
                       l2_clip_norm=0.05, noise_multiplier=0.7 if mode != "nonprivate" else 0.0,
                       delta=1e-7)
    mechanism = Mechanism(plan=plan, randomness=Randomness(mode="seeded", seed=3))
    cfg = {"mechanism": mechanism, "views": PixelViews(Tokenizer(patch_stride=PATCH_STRIDE)),
           "microbatch_size": microbatch_size}
    state = TrainState.create(trainable=params, frozen={}, tx=tx, mechanism=mechanism)
    return (lambda p, x: model.apply({"params": p}, x)), tx, cfg, state


def logical_batches(mode: str, physical: int = PHYSICAL):
    """``STEPS`` logical batches of 2 physical batches each (host numpy, same on every host)."""
    from conftest import random_batch

    from maskdp_jax.core.train_step import LogicalBatchData

    rng = np.random.default_rng(7)
    out = []
    for _ in range(STEPS):
        pub = [random_batch(rng, size=physical, clips=2) for _ in range(2)]
        priv = [random_batch(rng, size=physical, clips=2) for _ in range(2)]
        priv[-1]["weight"][-3:] = 0.0  # padding rows, as in a Poisson logical batch
        out.append(LogicalBatchData(public=pub if mode != "dp" else [],
                                    private=priv if mode != "nonprivate" else []))
    return out


def run(mode: str, mesh=None, *, batch_fn=lambda b: b, physical: int = PHYSICAL,
        microbatch_size: int | None = None):
    """Final trainable parameters (numpy) after ``STEPS`` steps, on ``mesh`` or one device."""

    from maskdp_jax.core import parallel
    from maskdp_jax.core.train_step import LogicalBatchData, make_train_step

    apply_fn, tx, cfg, state = setup(mode, microbatch_size)
    step = make_train_step(apply_fn=apply_fn, tx=tx, **cfg, mesh=mesh)
    if mesh is not None:
        state = parallel.replicate(state, mesh)
    for lb in logical_batches(mode, physical):
        lb = LogicalBatchData(public=[batch_fn(b) for b in lb.public],
                              private=[batch_fn(b) for b in lb.private])
        state, _ = step(state, lb)
    return parallel.to_host(state.trainable)


def rel_diff(a, b) -> float:
    import jax

    num = sum(float(np.sum((x - y) ** 2)) for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b),
                                                          strict=True))
    den = sum(float(np.sum(y ** 2)) for y in jax.tree.leaves(b))
    return float(np.sqrt(num / den))


def private_sum_trap(mesh):
    """Relative difference to one device of one private accumulation with params left invariant
    (the shard_map trap) and with the pcast (the shipped code)."""
    import functools

    import jax

    from maskdp_jax.core import parallel
    from maskdp_jax.core.train_step import accumulate, zeros_accumulator

    apply_fn, _, cfg, state = setup("maskdp")
    batch = logical_batches("maskdp")[0].private[0]
    fn = functools.partial(accumulate, public=False, apply_fn=apply_fn, **cfg)
    ref = jax.jit(fn)(zeros_accumulator(state.trainable), state.trainable, state.frozen, batch)
    out = {}
    for cast in (True, False):
        sharded = jax.jit(parallel.shard_accumulation(
            fn, zeros_accumulator, mesh, cast_to_varying=cast))
        acc = sharded(zeros_accumulator(state.trainable), state.trainable, state.frozen, batch)
        out["pcast" if cast else "invariant"] = rel_diff(
            parallel.to_host(acc.private), parallel.to_host(ref.private))
    return out


def flat(tree) -> dict[str, np.ndarray]:
    import jax

    return {"/".join(str(k.key) for k in path): np.asarray(leaf)
            for path, leaf in jax.tree_util.tree_leaves_with_path(tree)}


def main_devices(out_path: str) -> None:
    import jax

    from maskdp_jax.core import parallel

    assert jax.device_count() == 8, jax.devices()
    mesh = parallel.make_mesh()
    result = {"devices": jax.device_count()}
    for mode in ("maskdp", "dp", "nonprivate"):
        init = parallel.to_host(setup(mode)[3].trainable)
        one = run(mode)
        eight = run(mode, mesh)
        if mode == "maskdp":  # the single-device reference of the multi-process scenario
            np.savez(out_path + ".reference.npz", **flat(one))
        result[mode] = {
            "params": rel_diff(eight, one),
            "update": rel_diff(jax.tree.map(np.subtract, eight, init),
                               jax.tree.map(np.subtract, one, init)),
        }
    # microbatch_size inside shard_map: 2 examples per device, scanned one at a time. An error
    # (e.g. a scan carry whose varying-ness differs from the body's) is recorded, not raised, so
    # that only the test of this case fails.
    for mode in ("maskdp", "dp"):
        init = parallel.to_host(setup(mode)[3].trainable)
        try:
            one = run(mode, physical=2 * PHYSICAL)
            eight = run(mode, mesh, physical=2 * PHYSICAL, microbatch_size=1)
            result[f"{mode}/microbatch"] = {"update": rel_diff(
                jax.tree.map(np.subtract, eight, init), jax.tree.map(np.subtract, one, init))}
        except Exception as e:  # reported to the test, see above
            result[f"{mode}/microbatch"] = {"error": f"{type(e).__name__}: {e}"[:2000]}
    result["trap"] = private_sum_trap(mesh)
    with open(out_path, "w") as f:
        json.dump(result, f)


def main_process(pid: int, nproc: int, port: int, out_path: str) -> None:
    from maskdp_jax.core import parallel

    parallel.initialize_distributed(
        coordinator_address=f"127.0.0.1:{port}", num_processes=nproc, process_id=pid,
        cpu_collectives="gloo",
    )
    import jax

    mesh = parallel.make_mesh()
    rows = parallel.process_rows(PHYSICAL, mesh)

    def batch_fn(b):
        return parallel.global_batch({k: v[rows] for k, v in b.items()}, mesh, PHYSICAL)

    final = run("maskdp", mesh, batch_fn=batch_fn)
    np.savez(out_path, devices=jax.device_count(), local=jax.local_device_count(), **flat(final))
    jax.distributed.shutdown()


def main_preempt(pid: int, nproc: int, port: int, out_path: str) -> None:
    from maskdp_jax.core import parallel

    parallel.initialize_distributed(
        coordinator_address=f"127.0.0.1:{port}", num_processes=nproc, process_id=pid,
        cpu_collectives="gloo",
    )
    import jax

    # Step 1: only process 1 saw the signal; step 2: none did.
    agreed = [parallel.any_process(pid == 1), parallel.any_process(False)]
    with open(out_path, "w") as f:
        json.dump({"processes": jax.process_count(), "agreed": agreed}, f)
    jax.distributed.shutdown()


if __name__ == "__main__":
    if sys.argv[1] == "devices":
        main_devices(sys.argv[2])
    elif sys.argv[1] == "preempt":
        main_preempt(int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5])
    else:
        main_process(int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5])
