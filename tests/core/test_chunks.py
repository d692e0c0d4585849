"""The sample chunks of a test-set evaluation."""
from __future__ import annotations

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from tvolib.chunks import AUTO_ELEMENTS, auto_elements, sample_chunks


@settings(max_examples=30)
@given(S=st.integers(1, 3000), batch=st.integers(1, 500), chunk=st.one_of(st.none(), st.integers(1, 700)),
       device=st.sampled_from(["cpu", "cuda"]))
def test_chunks_cover_S(S, batch, chunk, device):
    chunks = sample_chunks(S, batch, 784, chunk, device)
    assert sum(chunks) == S and all(c >= 1 for c in chunks)
    assert len(set(chunks[:-1])) <= 1 and chunks[-1] <= chunks[0]
    if chunk is None:
        assert chunks[0] == max(1, min(S, AUTO_ELEMENTS[device] // (batch * 784)))


def test_automatic_size_by_device_type():
    assert auto_elements("cuda") == auto_elements(torch.device("cuda", 1)) == 2**24
    assert auto_elements("cpu") == auto_elements("meta") == 2**20
