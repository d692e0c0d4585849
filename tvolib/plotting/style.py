"""The one figure style: seaborn theme, fixed colours and markers per schedule and PCFG method,
the shared legend below the panels, wrapped titles, and the figure that says why it is empty."""
from __future__ import annotations

import os
import textwrap
from typing import Any, Iterable

import matplotlib

if not os.environ.get("DISPLAY") and not os.environ.get("MPLBACKEND"):
    # Headless runs (papermill, nbval, CI) must not need a display; inline Jupyter overrides this.
    matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import seaborn as sns  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from tvolib.paper.names import (  # noqa: E402
    PCFG_METHOD_COLOURS,
    PCFG_METHOD_ORDER,
    PCFG_SPARE_COLOURS,
    SCHEDULE_COLOURS,
    SCHEDULE_MARKERS,
    SPARE_COLOURS,
    SPARE_MARKERS,
    ordered,
)

__all__ = [
    "set_style",
    "schedule_palette",
    "schedule_markers",
    "pcfg_palette",
    "suptitle",
    "finish",
    "message_figure",
]


def set_style() -> None:
    """Apply the package's figure style (seaborn ``whitegrid``, paper context, editable PDF text)."""
    sns.set_theme(context="paper", style="whitegrid", font_scale=1.15)
    plt.rcParams.update({
        "figure.dpi": 110,
        "savefig.dpi": 160,
        "savefig.bbox": "tight",
        "legend.frameon": False,
        "axes.titlesize": "medium",
        "figure.titlesize": "medium",
        "pdf.fonttype": 42,  # embed TrueType fonts: editable text in the PDFs
    })


def _palette(names: list[Any], fixed: dict[str, int], spare: tuple[int, ...]) -> dict[Any, Any]:
    # the deep palette has ten colours; index 10: black, 11: navy (the spare colour of unnamed schedules)
    base = [*sns.color_palette("deep", 10), (0.0, 0.0, 0.0), (0.1, 0.1, 0.45)]
    out: dict[Any, Any] = {}
    extra = 0
    for name in names:
        if name in fixed:
            out[name] = base[fixed[name]]
        else:
            out[name] = base[spare[extra % len(spare)]]
            extra += 1
    return out


def schedule_palette(names: Iterable[str]) -> dict[str, Any]:
    """A colour per schedule, fixed by :data:`~tvolib.paper.names.SCHEDULE_COLOURS` so colours agree
    across figures; other names get the spare colours in legend order."""
    return _palette(ordered(names), SCHEDULE_COLOURS, SPARE_COLOURS)


def schedule_markers(names: Iterable[str]) -> dict[str, str]:
    """A marker per schedule (GP-bandit always a diamond); other names get the spare markers."""
    names = ordered(names)
    spare = iter(SPARE_MARKERS * (1 + len(names) // len(SPARE_MARKERS)))
    return {name: SCHEDULE_MARKERS[name] if name in SCHEDULE_MARKERS else next(spare) for name in names}


def pcfg_palette(methods: Iterable[str]) -> dict[str, Any]:
    """A colour per PCFG method: TVO-log and TVO-GP-bandit take the log and GP-bandit schedules'
    colours; the baselines colours no schedule uses."""
    return _palette(ordered(methods, PCFG_METHOD_ORDER), PCFG_METHOD_COLOURS, PCFG_SPARE_COLOURS)


def suptitle(fig: Figure, title: str) -> None:
    """A figure title wrapped to the figure's width (captions state the scale and can be long)."""
    chars = max(40, int(fig.get_figwidth() * 13))
    fig.suptitle("\n".join(textwrap.wrap(title, chars)))


def finish(fig: Figure, axes: Any, legend_title: str, title: str | None, ncol: int | None = None) -> Figure:
    """One legend below the panels (each label once, from all ``axes``) and the wrapped title."""
    handles, labels = [], []
    for ax in np.atleast_1d(axes).flat:
        for handle, label in zip(*ax.get_legend_handles_labels()):
            if label not in labels:
                handles.append(handle)
                labels.append(label)
    fig.legend(handles, labels, loc="outside lower center", ncol=ncol or max(len(labels), 1), title=legend_title)
    if title:
        suptitle(fig, title)
    return fig


def message_figure(message: str, title: str | None) -> Figure:
    """A figure that says why there is nothing to draw (e.g. a smoke run shorter than the burn-in)."""
    set_style()
    fig, ax = plt.subplots(figsize=(6.4, 2.4), layout="constrained")
    ax.text(0.5, 0.5, message, ha="center", va="center", wrap=True, transform=ax.transAxes)
    ax.set_axis_off()
    if title:
        suptitle(fig, title)
    return fig
