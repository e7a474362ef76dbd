"""Fixtures and hooks shared by the tests, and nothing else.

Helpers live in ``tests/support/`` (``from tests.support import ...``); this file is never
imported as a module.
"""
