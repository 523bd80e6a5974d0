"""The image: a digest-pinned base plus an overlay pinned file by file."""
