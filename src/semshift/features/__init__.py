"""semshift.features."""
