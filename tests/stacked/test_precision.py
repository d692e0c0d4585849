"""Precision as a run setting (``RunConfig.precision``): digests, scoping, bf16 vs fp32 numerics.

The digests of fp32 configs (every config written before the setting existed) must not change:
their results folders keep their names and their ``config.json`` files keep matching.
"""
from __future__ import annotations

from tvolib.training.images import RunConfig

#: Digests of configs that existed before ``precision``: pinned so that adding fields never renames them.
FP32_DIGESTS = {
    "d01831eb8b26": RunConfig(),
    "97b806a449a3": RunConfig(schedule="moments"),
    "5bdc70e452ff": RunConfig(objective="elbo", schedule="gp_bandit"),
    "d21d25d76027": RunConfig(model_options={"hidden": (50, 50)}),
}


def test_fp32_digests_unchanged():
    for digest, config in FP32_DIGESTS.items():
        assert config.digest() == digest
