"""semshift.taxonomy."""
