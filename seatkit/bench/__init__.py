"""The bundled bench: decode speed split into tokens kept per step and milliseconds per step."""
