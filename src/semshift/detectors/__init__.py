"""semshift.detectors."""
