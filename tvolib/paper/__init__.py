"""The paper's experiments: what to run, at which scale, and how results become figures and tables.

=================  ===============================================================================
module             job
=================  ===============================================================================
``names``          the one registry of schedule/method/dataset/metric names, orders, labels, styles
``profiles``       the scales (``smoke``, ``quick``, ``paper``), the PCFG's included
``sweeps``         every figure's configs, one function per figure stem (``FIGURES``)
``analysis``       pure pandas summaries and the paper's tables
``integrand``      Fig 1's curves and Riemann sums, from :mod:`tvolib.tvo`
``captions``       the captions that state each figure's scale
``results``        reading run results back (histories, dataset labels, Fig 1's model)
``figures``        ``figure(stem, ...)``: run a sweep, summarise, draw, save (what notebooks call)
=================  ===============================================================================

This package imports nothing itself, so that :mod:`tvolib.plotting` can read ``names`` without
pulling in torch. Example (what each notebook does)::

    from tvolib.paper.figures import figure
    result = figure("fig4_vae_mnist_fashion", profile="smoke")
"""
__all__: list[str] = []
