"""Each kind of extension added by one new module (or an entry point) and seen everywhere."""
