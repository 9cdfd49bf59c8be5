"""Stand-in of vLLM for the tests (only what the connector uses)."""
