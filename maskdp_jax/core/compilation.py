"""How the step's programs are compiled: the XLA compile options and the ``jit`` that applies them.

One option, for XLA:CPU only: no YNNPACK library fusion of dots
(``xla_cpu_experimental_ynn_fusion_type`` empty), so XLA's own dot kernels run instead: the
selective ``maskdp`` and ``dp`` steps run faster, compilation is somewhat slower
(benchmarks/results/history.md, "XLA:CPU without YNNPACK dot fusion"); and the same dot kernels
run whether or not a program is vmapped over models (YNNPACK's model-batched product differs from
the one-model product in the last bit), which makes :mod:`maskdp_jax.audit.shadows`' vmapped
shadow models equal the one-at-a-time loop's bit for bit. Passed per program, so no ``XLA_FLAGS``
environment variable is needed and other programs of the process are unchanged. It is an XLA:CPU
option, so it is passed only when the default backend is the CPU.

It lives in the DP core because the core's step (:func:`maskdp_jax.core.train_step.make_train_step`)
compiles its own pieces; every other user (the audit's shadow models, the benchmarks) imports it
from here.
"""

from __future__ import annotations

from collections.abc import Callable

import jax

#: Compile options of the step's programs on the CPU, YNNPACK dot fusion off (the module says why).
CPU_COMPILER_OPTIONS: dict[str, str] = {"xla_cpu_experimental_ynn_fusion_type": ""}


def jit(fn: Callable, **kwargs) -> Callable:
    """``jax.jit(fn, **kwargs)``, with :data:`CPU_COMPILER_OPTIONS` when the default backend is
    the CPU. The numerics of a program compiled by it are those every test of the step checks.

    >>> import jax.numpy as jnp
    >>> float(jit(lambda x: x @ x)(jnp.ones(3)))
    3.0
    """
    if jax.default_backend() == "cpu":
        kwargs = {**kwargs, "compiler_options": CPU_COMPILER_OPTIONS}
    return jax.jit(fn, **kwargs)
