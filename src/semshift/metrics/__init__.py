"""semshift.metrics."""
