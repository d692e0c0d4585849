"""Many runs of one configuration as one batched computation (stacked along a leading run dimension K).

* :mod:`.models` -- :class:`StackedModel`: K copies of the VAE or SBN built from single-run models;
* :mod:`.objectives` -- the training losses of :mod:`tvolib.objectives`, batched over runs;
* :mod:`.optim` -- :class:`StackedAdam`: K independent Adam optimisers over the stacked tensors.
"""
from .models import StackedModel, batched_linear

__all__ = ["StackedModel", "batched_linear"]
