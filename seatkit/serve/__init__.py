"""Running a seat: the launch spec, the rendered script, the runtimes that start it, its client."""
