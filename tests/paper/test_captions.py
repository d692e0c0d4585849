"""Captions state the scale."""
from __future__ import annotations

import pandas as pd
import pytest

from tvolib.paper import captions


def pcfg_configs(seeds=(0, 1, 2)) -> pd.DataFrame:
    return pd.DataFrame([dict(objective=o, d=5 if o == "tvo" else 1, S=s, seed=seed, epochs=40, n_train=10, n_test=7,
                              batch_size=2, lr=3e-3, hidden_dim=32, eval_max_words=9)
                         for o in ("tvo", "reinforce") for s in (2, 20) for seed in seeds])


def test_scale_caption_states_the_profile():
    assert captions.scale_caption("paper") == ("profile 'paper': full datasets, 10000 epochs, batch 1000, 5 seeds, "
                                               "test log p(x) by IWAE-5000")
    quick = captions.scale_caption("quick", epochs=7, extra="more")
    assert quick.startswith("profile 'quick': 1000 train / 300 test examples, 7 epochs, batch 50, 3 seeds")
    assert "(reduced scale, see notebook); more" in quick
    assert "1 seed," in captions.scale_caption("smoke")


def test_pcfg_scale_caption_states_the_scale():
    text = captions.pcfg_scale_caption(pcfg_configs(), "quick")
    assert text.startswith("profile 'quick': 10 training / 7 test sentences (test sentences <= 9 words), 40 epochs")
    assert "3 seeds" in text and "S in {2, 20}" in text and "Adam lr 0.003" in text
    assert "TVO d = 5," in text  # the baselines' d = 1 is not reported
    assert "paper: 2000 epochs" in text and "reduced" not in captions.pcfg_scale_caption(pcfg_configs(), "paper")
    assert "1 seed," in captions.pcfg_scale_caption(pcfg_configs(seeds=(0,)))
    with pytest.raises(ValueError, match="hidden_dim"):
        captions.pcfg_scale_caption(pcfg_configs().drop(columns="hidden_dim"))


def test_table_captions_name_the_appendix_and_scale():
    assert captions.wallclock_caption("quick", "omniglot (derived 28x28)", 10).startswith(
        "Wall-clock table (Appendix D.3), VAE on omniglot (derived 28x28), S = 10, 60 epochs; bandit for d in [2, 3, 4]")
    assert "mean over 3 seed(s)" in captions.permutation_caption("quick")
    assert captions.pcfg_table_caption("SCALE").endswith("higher is better. SCALE")
