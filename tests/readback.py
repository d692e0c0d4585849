"""Counting or forbidding the ways a tensor's values come back to the host (for the no-sync tests).

On the CPU a read-back method of ``torch.Tensor`` (``item``, ``tolist``, ``bool``...) is what would
synchronise with an accelerator's queue; the tests patch them to count or forbid calls while a
training loop runs. On CUDA, ``torch.cuda.set_sync_debug_mode("error")`` is the real check.
"""
from __future__ import annotations

import torch

READ_BACK = ("item", "tolist", "__bool__", "__float__", "__int__", "cpu", "numpy")


class ReadBackGuard:
    """Replace the read-back methods of ``torch.Tensor``; count calls (``forbid``: raise instead)."""

    def __init__(self, monkeypatch, forbid: bool) -> None:
        self.calls = dict.fromkeys(READ_BACK, 0)
        for name in READ_BACK:
            original = getattr(torch.Tensor, name)

            def patched(tensor, *args, _name=name, _original=original, **kwargs):
                if forbid:
                    raise AssertionError(f"Tensor.{_name} called inside the minibatch loop")
                self.calls[_name] += 1
                return _original(tensor, *args, **kwargs)

            monkeypatch.setattr(torch.Tensor, name, patched)
