"""semshift.protocols."""
