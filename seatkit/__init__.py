"""seatkit: reproduce one fast LLM serving seat, and explain its numbers."""

__version__ = "0.1.0"
