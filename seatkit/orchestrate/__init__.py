"""Flows that use serve, image and bench together; they sit above those packages, which never
import from here (the dependencies point down: cli -> orchestrate -> serve, image, bench)."""
