"""The soft likelihood: batched Levenshtein distance and ``-Lev**2``."""
from __future__ import annotations

import torch
from hypothesis import given
from hypothesis import strategies as st

from tvolib.models.pcfg import encode_sentences, levenshtein, soft_log_likelihood


def _lev_reference(a, b):
    prev = list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        cur = [i]
        for j, y in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (x != y)))
        prev = cur
    return prev[-1]


@given(st.lists(st.tuples(st.lists(st.integers(0, 3), min_size=1, max_size=9),
                          st.lists(st.integers(0, 3), min_size=1, max_size=9)), min_size=1, max_size=5))
def test_levenshtein_matches_reference(pairs):
    a = [p[0] for p in pairs]
    b = [p[1] for p in pairs]
    pad = lambda rows: torch.tensor([r + [7] * (9 - len(r)) for r in rows])  # noqa: E731
    got = levenshtein(pad(a), torch.tensor([len(r) for r in a]), pad(b), torch.tensor([len(r) for r in b]))
    assert got.tolist() == [float(_lev_reference(x, y)) for x, y in zip(a, b)]


def test_soft_likelihood_is_minus_squared_distance(grammar):
    x = grammar.tokenize("astronomers saw stars")
    yields = [x, grammar.tokenize("astronomers saw ears"), grammar.tokenize("saw"), x + (grammar.unk,)]
    y, y_len = encode_sentences(yields, grammar)
    s, s_len = encode_sentences([x] * 4, grammar)
    assert soft_log_likelihood(y, y_len, s, s_len).tolist() == [0.0, -1.0, -4.0, -1.0]
    assert soft_log_likelihood(y, y_len, s, s_len, scale=0.5).tolist() == [0.0, -0.5, -2.0, -0.5]
