"""Shims that let Lightning Thunder 0.2.6 import under newer PyTorch.

Thunder 0.2.6 builds its table of auto-registered torch operators at import time and names
the named-tensor methods ``Tensor.align_as``, ``align_to``, ``has_names``, ``refine_names`` and
``rename``. PyTorch 2.13 removed them, so ``import thunder`` fails with an ``AttributeError``.
:func:`apply` puts stand-ins on ``torch.Tensor`` for the missing ones; each raises
``NotImplementedError`` when called, exactly as a removed method would fail. On PyTorch versions
that still have the methods nothing changes.

It must run before Thunder is imported; importing :mod:`thunder_padvec` first does that.
"""

from __future__ import annotations

import torch

REMOVED_NAMED_TENSOR_METHODS = ("align_as", "align_to", "has_names", "refine_names", "rename")


def _removed_method(name: str):
    def method(self, *args, **kwargs):
        raise NotImplementedError(f"torch.Tensor.{name} was removed from PyTorch {torch.__version__}")

    # Thunder derives the operator's name from these attributes.
    method.__name__ = name
    method.__qualname__ = f"Tensor.{name}"
    method.__module__ = "torch"
    return method


def apply() -> tuple[str, ...]:
    """Adds stand-ins for the removed methods; returns the names it added."""
    added = tuple(name for name in REMOVED_NAMED_TENSOR_METHODS if not hasattr(torch.Tensor, name))
    for name in added:
        setattr(torch.Tensor, name, _removed_method(name))
    return added
