"""TEMPORARY shim, removed at integration: the sweeps live in :mod:`tvolib.paper.sweeps`."""
from tvolib.paper.sweeps import *  # noqa: F401,F403
from tvolib.paper.sweeps import (  # noqa: F401
    DATA_SEED,
    FIGURE_ALIASES,
    FIGURES,
    LOG_BETA1,
    WINDOWED_SCHEDULES,
    _grid,
    _model_for,
    _showcase_d,
    fig1_tvo_integrand as fig1_integrand,
    fig4_vae_mnist_fashion as fig4_vae,
    fig5_sbn_binarized_mnist as fig5_sbn_mnist,
)
