"""semshift.splits."""
