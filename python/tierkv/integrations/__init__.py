"""Inference engine integrations of tierkv (see docs/sglang.md)."""
