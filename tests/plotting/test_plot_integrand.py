"""Fig 1's drawing."""
from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

from tvolib.plotting import IntegrandPanel, plot_integrand  # noqa: E402


def panel(label, estimate=None) -> IntegrandPanel:
    beta = np.linspace(0, 1, 50)
    return IntegrandPanel(label, beta, -10 + 3 * beta ** 0.3, nodes=np.array([0.0, 0.1, 0.4, 1.0]),
                          heights=np.array([-10.0, -8.5, -8.0, -7.0]), left=-8.4, right=-7.6, elbo=-10.0, area=-7.9,
                          estimate=estimate)


def test_one_panel_per_curve_with_both_sums_and_the_elbo():
    beta = np.linspace(0, 1, 50)
    fig = plot_integrand([panel("closed form", (beta[::5], -10 + 3 * beta[::5] ** 0.3)), panel("VAE")], title="scale")
    assert len(fig.axes) == 2
    ax = fig.axes[0]
    assert len(ax.patches) == 2 * 3  # a left and a right rectangle per interval
    heights = [p.get_height() for p in ax.patches]
    floor = ax.patches[0].get_y()
    assert heights[0] + floor == pytest.approx(-10.0) and heights[1] + floor == pytest.approx(-8.5)
    labels = ax.get_legend_handles_labels()[1]
    assert "ELBO = -10.00" in labels and "SNIS estimate" in labels
    assert "left Riemann sum (TVO) = -8.40" in labels and "right Riemann sum = -7.60" in labels
    assert "SNIS estimate" not in fig.axes[1].get_legend_handles_labels()[1]
    assert fig._suptitle.get_text() == "scale"
    with pytest.raises(ValueError, match="at least one"):
        plot_integrand([])
