"""The `seat` command: thin wrappers that call the library and format what it returns.

The group and its entry point are in seatkit.cli.app; each command group has its own module."""
