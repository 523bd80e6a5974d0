"""Drawing plumbing every figure of the kit shares: matplotlib on demand, saved the same way."""

from __future__ import annotations

from pathlib import Path


def pyplot():
    """matplotlib, imported only when a plot is drawn (`seat --help` never pays for it)."""
    import matplotlib

    matplotlib.use("Agg")  # files only, no display
    import matplotlib.pyplot as plt

    return plt


def save(fig, path: Path) -> Path:
    plt = pyplot()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
