"""Spawning participants (native, QEMU AArch64) and fault-injecting relays for tests and gates."""
