"""The soft likelihood ``l(x | z)`` of the PCFG experiment (the paper's Appendix D.1).

The 0/1 likelihood ``1[yield(z) = x]`` is relaxed as in Le et al. (2019)'s code:
``log l(x | z) = -c * Lev(yield(z), x)**2`` with ``Lev`` the Levenshtein (edit) distance between
word sequences and ``c = 1``. It equals 1 exactly when ``z`` parses ``x``, so on the parses of
``x`` it is the hard likelihood; it is *unnormalised* in ``x`` (the normaliser
``sum_x exp(-c Lev(yield z, x)**2)`` depends on ``z``).
"""
from __future__ import annotations

import torch
from torch import Tensor

__all__ = ["levenshtein", "soft_log_likelihood"]


def levenshtein(a: Tensor, a_len: Tensor, b: Tensor, b_len: Tensor) -> Tensor:
    """Batched Levenshtein distance between token rows ``a[k, :a_len[k]]`` and ``b[k, :b_len[k]]``.

    Row-by-row dynamic programme, vectorised over the batch and over each row: with
    ``E[j] = min(D[i-1, j] + 1, D[i-1, j-1] + [a_i != b_j])`` the in-row insertion chain is
    ``D[i, j] = j + cummin_{k<=j} (E[k] - k)``. Works on any device.

    Args:
        a, b: ``(n, La)`` and ``(n, Lb)`` token ids (padding beyond the lengths is ignored).
        a_len, b_len: ``(n,)`` lengths.

    Returns:
        ``(n,)`` float distances.

    Example:
        >>> levenshtein(torch.tensor([[1, 2, 3]]), torch.tensor([3]), torch.tensor([[1, 3]]), torch.tensor([2]))
        tensor([1.])
    """
    n, la = a.shape
    lb = b.shape[1]
    j = torch.arange(lb + 1, device=a.device, dtype=torch.float32)
    row = j.expand(n, lb + 1).clone()
    out = torch.where(a_len == 0, b_len.float(), torch.zeros(n, device=a.device))
    for i in range(1, la + 1):
        sub = row[:, :-1] + (a[:, i - 1: i] != b).float()
        e = torch.cat([torch.full((n, 1), float(i), device=a.device), torch.minimum(row[:, 1:] + 1, sub)], dim=1)
        row = j + torch.cummin(e - j, dim=1).values
        out = torch.where(a_len == i, row.gather(1, b_len[:, None]).squeeze(1), out)
    return out


def soft_log_likelihood(yields: Tensor, yield_len: Tensor, sentences: Tensor, sentence_len: Tensor,
                        scale: float = 1.0) -> Tensor:
    """``log l(x | z) = -scale * Lev(yield(z), x)**2`` (0 on exact parses).

    Args:
        yields, yield_len: the padded yields of the trees ``z`` and their lengths.
        sentences, sentence_len: the padded sentences ``x`` (one per tree) and their lengths.
        scale: the constant ``c``.

    Returns:
        ``(n,)`` log-likelihoods.
    """
    return -scale * levenshtein(yields, yield_len, sentences, sentence_len) ** 2
