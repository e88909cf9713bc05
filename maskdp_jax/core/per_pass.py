"""MaskDP's two passes, each with an optimiser of its own.

The papers' step adds the unclipped public sum and the clipped, noised private sum and hands the
total to one optimiser. Under an optimiser that normalises each coordinate's step (Adam), the
update's scale is then set by whichever part is louder. Where the public gradient (the loss's
scale, unclipped) is louder than the clipped private sum, the private pass moves the parameters
by a vanishing fraction of the learning rate, whatever it learns (docs/guides/training.md, "Where
MaskDP pays"); where the noise σC/B is louder than the public gradient, it sets the step and
drowns what the public pass learns (the digits example, docs/api.md).

With :func:`per_pass` the mechanism hands over the two parts apart (:class:`PassGradients`, from
:meth:`~maskdp_jax.core.mechanism.Mechanism.finish` with ``per_pass=True``) and each gets its own
optimiser state and learning rate; the update is the sum of the two updates. So the private
pass moves the parameters as DP-SGD's update would, and the public pass as public-only training's.

Privacy: the private optimiser's input is ``(clipped private sum + noise) / B``, the step's DP
release, and its state is a function of earlier releases only; the public optimiser reads public
data only. The update is post-processing of the releases and public data, so C, σ and ε are
those of the plan. Optax composes transformations over one gradient tree and has no
transformation that routes two gradient trees to two states; this module is that router, the
optimisers themselves stay optax's.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import optax

PyTree = Any


class PassGradients(NamedTuple):
    """One step's update direction in its two parts, each in the structure of the trainable
    parameters; their sum is the direction one optimiser would get.

    Attributes:
      public: ``λ · public sum / B``: public pixels, masks and labels only.
      private: ``(clipped private sum + noise) / B``: the step's DP release (zero on the leaves a
        private pass over part of the parameters does not train; no noise there).
    """

    public: PyTree
    private: PyTree

    def total(self) -> PyTree:
        """``public + private``: the direction of the papers' one-optimiser step."""
        return optax.tree.add(self.public, self.private)


class PerPassState(NamedTuple):
    """The states of :func:`per_pass`'s two optimisers (checkpointed with the rest)."""

    public: optax.OptState
    private: optax.OptState


class PerPassTransformation(optax.GradientTransformation):
    """An optax transformation whose ``update`` takes :class:`PassGradients` (:func:`per_pass`);
    its own type so that a step can refuse to pair it with a one-sum mechanism."""

    __slots__ = ()


def per_pass(public: optax.GradientTransformation,
             private: optax.GradientTransformation) -> PerPassTransformation:
    """An optimiser per pass: ``update(PassGradients(g_pu, g_pr), state, params)`` returns
    ``public.update(g_pu) + private.update(g_pr)``, each with its own state.

    Args:
      public: the public pass's optimiser (e.g. ``optax.adam(lr)``), its state over public
        gradients only.
      private: the private pass's optimiser, its state over the DP releases only. A leaf the
        private pass never trains gets zero gradients; Adam's update there is 0.

    Raises:
      TypeError: (at ``update``) the gradients are one tree, not :class:`PassGradients`: the
        mechanism was built without ``per_pass=True``.
    """

    def init(params):
        return PerPassState(public=public.init(params), private=private.init(params))

    def update(grads, state, params=None):
        if not isinstance(grads, PassGradients):
            raise TypeError(
                "a per-pass optimiser takes each pass's gradient apart (PassGradients); got "
                f"{type(grads).__name__}: build the Mechanism with per_pass=True.")
        public_updates, public_state = public.update(grads.public, state.public, params)
        private_updates, private_state = private.update(grads.private, state.private, params)
        return (optax.tree.add(public_updates, private_updates),
                PerPassState(public=public_state, private=private_state))

    return PerPassTransformation(init, update)
