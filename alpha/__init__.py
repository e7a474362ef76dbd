"""Alpha: distributed data-parallel learning, one executable per role.

The pure layers (membership, topology, and later the protocol, identity, frame
codec and combine order) take values and return values; only the runtime,
launcher and harness do I/O.
"""

from alpha.errors import AlphaError

__all__ = ["AlphaError", "__version__"]
__version__ = "0.1.0"
