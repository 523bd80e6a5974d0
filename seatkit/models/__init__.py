"""Model weights pinned like the overlay: a lock per profile, verify, fetch."""
