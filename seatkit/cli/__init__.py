"""The `seat` command: thin wrappers that call the library and format what it returns."""

from seatkit.cli import bench, campaign, doctor, host, image, models, overlay, serve  # noqa: F401 - they register their commands on `seat`
from seatkit.cli.app import main, seat

__all__ = ["main", "seat"]
