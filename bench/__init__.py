"""Benchmarks: medians of repeated runs, each against a reference measured in the same run.

``python -m bench`` (``make bench``) runs them all and rewrites ``docs/benchmarks.md``;
``python -m bench NAME ...`` runs some and prints their sections without writing.
"""
