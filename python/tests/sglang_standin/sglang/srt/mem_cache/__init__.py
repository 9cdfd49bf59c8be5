"""Stand-in package for the tierkv tests (not SGLang)."""
