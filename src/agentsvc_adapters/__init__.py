"""Adapters: each implements a core port and speaks only core types outward."""
