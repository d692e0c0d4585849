"""Fig 1: the TVO integrand with its left and right Riemann sums and the ELBO rectangle."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import matplotlib.pyplot as plt
import numpy as np
import seaborn as sns
from matplotlib.figure import Figure

from tvolib.plotting.style import set_style, suptitle

__all__ = ["IntegrandPanel", "plot_integrand"]


@dataclass(frozen=True)
class IntegrandPanel:
    """What one panel of Fig 1 draws (built by :mod:`tvolib.paper.figures` from
    :mod:`tvolib.paper.integrand`): the curve ``values`` on ``beta``, the quadrature ``nodes``
    ``[b_0, ..., 1]`` with the curve's ``heights`` there, the ``left``/``right`` sums, the ``elbo``,
    the ``area`` under the curve (named ``area_label``) and optional SNIS ``estimate`` points."""

    label: str
    beta: np.ndarray
    values: np.ndarray
    nodes: np.ndarray
    heights: np.ndarray
    left: float
    right: float
    elbo: float
    area: float
    area_label: str = r"$\log p(x)$"
    estimate: tuple[np.ndarray, np.ndarray] | None = None


def _draw_sums(ax: plt.Axes, panel: IntegrandPanel, floor: float, colours: list) -> None:
    """Left rectangles (shaded), right rectangles (dashed outline) and the ELBO (dotted)."""
    nodes, heights = panel.nodes, panel.heights
    for i in range(len(nodes) - 1):
        width = nodes[i + 1] - nodes[i]
        ax.bar(nodes[i], heights[i] - floor, width=width, bottom=floor, align="edge", color=colours[0], alpha=0.3,
               edgecolor=colours[0], linewidth=0.8,
               label=f"left Riemann sum (TVO) = {panel.left:.2f}" if i == 0 else None)
        ax.bar(nodes[i], heights[i + 1] - floor, width=width, bottom=floor, align="edge", fill=False,
               edgecolor=colours[1], linewidth=1.2, linestyle="--",
               label=f"right Riemann sum = {panel.right:.2f}" if i == 0 else None)
    ax.plot([0, 0, 1, 1], [floor, panel.elbo, panel.elbo, floor], color="black", linestyle=":", linewidth=1.5,
            label=f"ELBO = {panel.elbo:.2f}")


def plot_integrand(panels: Sequence[IntegrandPanel], *, title: str | None = None) -> Figure:
    """Fig 1: per panel, the integrand versus beta with the left Riemann sum (the TVO lower bound,
    shaded), the right Riemann sum (outlined) and the ELBO rectangle (dotted).

    Rectangles are drawn from the bottom of the axes, so their areas are relative; the legend
    states the sums.

    Args:
        panels: one :class:`IntegrandPanel` per panel, left to right.
        title: the figure title (the scale caption).

    Returns:
        The figure.
    """
    if not panels:
        raise ValueError("plot_integrand needs at least one IntegrandPanel")
    set_style()
    colours = sns.color_palette("deep")
    fig, axes = plt.subplots(1, len(panels), figsize=(5.6 * len(panels), 4.8), squeeze=False, layout="constrained")
    for ax, panel in zip(axes[0], panels):
        lo = min(float(np.min(panel.values)), panel.elbo)
        hi = float(np.max(panel.values))
        pad = 0.08 * (hi - lo if hi > lo else 1.0)
        floor = lo - pad
        _draw_sums(ax, panel, floor, colours)
        ax.plot(panel.beta, panel.values, color=colours[3], linewidth=2.0,
                label=rf"$E_{{\pi_\beta}}[\log w]$ (area = {panel.area_label} = {panel.area:.2f})")
        if panel.estimate is not None:
            ax.plot(panel.estimate[0], panel.estimate[1], "o", color=colours[3], markersize=3.5,
                    markerfacecolor="white", label="SNIS estimate")
        ax.set_xlim(0, 1)
        ax.set_ylim(floor, hi + pad)
        ax.set_xlabel(r"$\beta$")
        ax.set_ylabel(r"$E_{\pi_\beta}[\log p(x,z) - \log q(z|x)]$ (nats)")
        ax.set_title(panel.label)
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=2, fontsize="small")
    if title:
        suptitle(fig, title)
    return fig
