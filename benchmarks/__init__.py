"""Benchmarks (results: docs/benchmarks.md); a package so that ``from benchmarks import ...``
finds these modules before any installed distribution that also ships a top-level ``benchmarks``."""
