"""semshift.demo."""
