"""TEMPORARY shim, removed at integration: the sweeps live in :mod:`tvolib.paper.sweeps`."""
from tvolib.paper.sweeps import *  # noqa: F401,F403
from tvolib.paper.sweeps import DATA_SEED, LOG_BETA1, WINDOWED_SCHEDULES  # noqa: F401
from tvolib.paper.sweeps import fig1_tvo_integrand as fig1_integrand  # noqa: F401
from tvolib.paper.sweeps import fig4_vae_mnist_fashion as fig4_vae  # noqa: F401
from tvolib.paper.sweeps import fig5_sbn_binarized_mnist as fig5_sbn_mnist  # noqa: F401
