"""`seat doctor`: every layer of a seat checked at once, each row OK, WARN or FAIL with the fix."""
