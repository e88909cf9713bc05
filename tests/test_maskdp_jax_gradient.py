"""The library call ``masked_gradient`` inside the caller's ``shard_map`` (``axis_name``).

This pytest process has already started JAX with one CPU device, so the two-device case runs in
a subprocess with ``--xla_force_host_platform_device_count=2``: a linear model on four examples,
which imports and compiles in seconds (tests/test_maskdp_jax_parallel.py runs the project's step
on eight devices, in the slow lane).
"""

import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

TWO_DEVICES = r"""
import jax, jax.numpy as jnp, numpy as np
from jax.sharding import PartitionSpec as P
from maskdp_jax.core import gradient
from maskdp_jax.core.plan import PrivacyPlan

assert jax.device_count() == 2, jax.devices()
C = 0.1
plan = PrivacyPlan(mode="dp", num_examples=10**6, batch_size=4, steps=1, l2_clip_norm=C,
                   noise_multiplier=1.0, delta=1e-7)
rng = np.random.default_rng(0)
x, y = rng.normal(size=(4, 3)).astype(np.float32), rng.normal(size=4).astype(np.float32)
params = {"w": jnp.asarray(rng.normal(size=3), jnp.float32)}
batch = gradient.Examples(inputs=jnp.asarray(x), targets=jnp.asarray(y), weights=jnp.ones(4))

def loss(p, xi, yi):  # one example
    return (xi @ p["w"] - yi) ** 2

def grad(p, private, key, axis_name=None):
    return gradient.masked_gradient(loss, p, plan=plan, key=key, private=private,
                                    axis_name=axis_name)[0]["w"]

key = jax.random.key(1)
one = jax.jit(grad)(params, batch, key)
norms = jnp.linalg.norm(jax.vmap(jax.grad(loss), in_axes=(None, 0, 0))(params, x, y)["w"], axis=1)
mesh = jax.make_mesh((2,), ("data",))
batch = jax.device_put(batch, jax.sharding.NamedSharding(mesh, P("data")))
params, key = jax.device_put((params, key), jax.sharding.NamedSharding(mesh, P()))
two = jax.jit(jax.shard_map(lambda p, b, k: grad(p, b, k, "data"), mesh=mesh,
                            in_specs=(P(), P("data"), P()), out_specs=P()))(params, batch, key)
print(float(jnp.max(jnp.abs(one - two))), float(jnp.min(norms)) / C)
"""


def test_masked_gradient_in_shard_map_clips_each_devices_own_examples():
    """With ``axis_name`` over two devices (two examples each), ``masked_gradient`` equals the
    one-device call: each example's gradient is clipped alone. Taken w.r.t. parameters that stay
    replicated (invariant) inside ``shard_map``, ``vmap(grad)`` would sum every example's
    gradient with its partner's on the other device before clipping (docs/design.md); the
    parameters are cast to varying first. Every gradient here is clipped (norm > C), so any
    mixing changes the result."""
    env = dict(os.environ, JAX_PLATFORMS="cpu")  # with the session's XLA_FLAGS (conftest.py)
    env["XLA_FLAGS"] = f"{env.get('XLA_FLAGS', '')} --xla_force_host_platform_device_count=2"
    out = subprocess.run([sys.executable, "-c", TWO_DEVICES], env=env, cwd=ROOT,
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-4000:]
    diff, smallest_norm_over_c = map(float, out.stdout.strip().splitlines()[-1].split())
    assert smallest_norm_over_c > 1.5
    assert diff < 1e-6
