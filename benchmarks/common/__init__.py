"""Helpers that several benchmarks share: what machine a result was measured on."""
