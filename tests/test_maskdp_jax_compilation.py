"""maskdp_jax.core.compilation: the pinned jaxlib accepts the compile options, and they do what the
module says (no YNNPACK dot fusion in the compiled CPU program)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from maskdp_jax.core import compilation


def _on_cpu(x):
    return jax.device_put(x, jax.devices("cpu")[0])


def _matmul_tanh(x):
    return jnp.tanh(x @ x)


def test_the_options_compile_and_run_on_cpu():
    x = _on_cpu(jnp.ones((64, 64)))
    out = jax.jit(_matmul_tanh, compiler_options=compilation.CPU_COMPILER_OPTIONS)(x)
    np.testing.assert_allclose(np.asarray(out), np.tanh(np.full((64, 64), 64.0)))


def test_the_options_turn_off_the_ynnpack_dot_fusion():
    x = _on_cpu(jnp.ones((64, 64)))

    def compiled_text(options):
        return jax.jit(_matmul_tanh, compiler_options=options).lower(x).compile().as_text()

    # Without the options this jaxlib fuses the dot into YNNPACK: the check can fail.
    assert "__ynn_fusion" in compiled_text(None)
    assert "__ynn_fusion" not in compiled_text(compilation.CPU_COMPILER_OPTIONS)


def test_an_unknown_option_is_rejected():
    x = _on_cpu(jnp.ones(3))
    with pytest.raises(jax.errors.JaxRuntimeError, match="No such compile option"):
        jax.jit(_matmul_tanh, compiler_options={"xla_cpu_no_such_option": ""})(x)


@pytest.mark.skipif(jax.default_backend() != "cpu", reason="the options are passed on CPU only")
def test_jit_passes_the_options_on_cpu(monkeypatch):
    monkeypatch.setattr(compilation, "CPU_COMPILER_OPTIONS", {"xla_cpu_no_such_option": ""})
    with pytest.raises(jax.errors.JaxRuntimeError, match="No such compile option"):
        compilation.jit(_matmul_tanh)(jnp.ones(3))
