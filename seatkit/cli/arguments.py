"""Arguments several commands share. Apart from app.py, so that `seat --help` does not load the
profile model (pydantic) for the default a command's argument shows."""

import click

from seatkit.seat import profiles

PROFILE = click.argument("profile", default=profiles.DEFAULT_PROFILE, metavar="[PROFILE]")
