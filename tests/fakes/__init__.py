"""Fakes for tests and benchmarks: scripted stand-ins for external services."""
