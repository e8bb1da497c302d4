"""Benchmarks of agentsvc: ``python -m bench`` (see docs/performance.md)."""
