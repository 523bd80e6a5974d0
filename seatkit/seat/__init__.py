"""The seat as data: profiles and their grammar, what may change what runs, and the overlay lock's
shape. Every other package builds on this one; it imports only the kit's root helpers."""
