"""tvolib: the TVO, its GP-bandit schedule, and the experiments of "Gaussian Process Bandit
Optimization of the Thermodynamic Variational Objective" (NeurIPS 2020).

=================  =================================================================================
module             job
=================  =================================================================================
``tvo``            the paper's Eqs. 1-5: schedules' points, SNIS integrand, Riemann sums, IWAE bound
``objectives``     gradient estimators: the TVO's covariance estimator and the baselines' losses
``schedules``      the ``Schedule`` interface; fixed and moments schedules
``bandit/``        the time-varying, permutation-invariant GP-UCB schedule (and random search)
``checks``         one checker for tensors, ints and schedules given to public entry points
``models/``        Gaussian VAE, Sigmoid Belief Network, linear-Gaussian toy, PCFG (``models/pcfg/``)
``data/``          MNIST, Fashion-MNIST, binarized MNIST, Omniglot: checked files, parsed caches
``training/``      THE training loop (``loop``), the image and PCFG experiments, evaluation
``stacked/``       many runs of one shape as one batched computation (``training.train_many``)
``runs/``          results folders, the cache, stacks, local/Slurm executors, status, plan, cost
``paper/``         profiles, every figure's sweep, names, analysis, captions, ``figures.figure``
``plotting/``      drawing only (matplotlib/seaborn), no computation
``config``         the config base class (JSON round trip, digest); ``checkpoint``: atomic files
=================  =================================================================================

Example:
    >>> from tvolib.tvo import linear, tvo_bound
    >>> import torch
    >>> tvo_bound(torch.zeros(10, 2), linear(5))    # log w = 0: every bound is 0
    tensor([0., 0.])
"""
__version__ = "0.2.0"
