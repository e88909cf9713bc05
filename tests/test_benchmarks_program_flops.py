"""benchmarks/program_flops.py counts a lowered program's matrix-product FLOPs by operand dtype,
a nested jit's products once per call, a convolution by its kernel window."""

import jax
import jax.numpy as jnp
import pytest

from benchmarks import program_flops


def test_products_are_counted_by_dtype_and_per_call():
    @jax.jit
    def inner(x, w):  # 2 x 5 x 6 outputs, 4 contracted each; called twice
        return jnp.einsum("pti,io->pto", x, w)

    def program(x, w, image):
        y = inner(x, w) + inner(x, w)
        z = jax.lax.conv_general_dilated(image, jnp.ones((3, 3, 4, 8), jnp.bfloat16), (1, 1),
                                         "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))
        xb = x.astype(jnp.bfloat16)
        return y, jnp.einsum("pti,pto->pio", xb, xb, preferred_element_type=jnp.float32), z

    lowered = jax.jit(program).lower(jnp.ones((2, 5, 4)), jnp.ones((4, 6)),
                                     jnp.ones((1, 7, 7, 4), jnp.bfloat16))
    counted = program_flops.count(lowered)
    assert counted.flops[("f32", "f32")] == 2 * (2 * 2 * 5 * 6 * 4)
    conv = 2 * (7 * 7 * 8) * (3 * 3 * 4)
    assert counted.flops[("bf16", "bf16")] == conv + 2 * (2 * 4 * 4) * 5
    assert counted.products[("f32", "f32")] == 2 and counted.loops == 0
    assert counted.share("bf16") == pytest.approx(counted.flops[("bf16", "bf16")] / counted.total)


def test_a_loop_body_is_counted_once_and_said():
    def program(x):
        return jax.lax.map(lambda r: r @ r.T, x)

    counted = program_flops.count(jax.jit(program).lower(jnp.ones((3, 4, 5))))
    assert counted.loops == 1
    assert counted.total == 2 * 4 * 4 * 5


def test_an_unknown_entry_is_refused():
    with pytest.raises(ValueError, match="no function @nope"):
        program_flops.count_text("func.func public @main() {\n}\n", entry="nope")
