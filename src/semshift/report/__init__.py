"""semshift.report."""
