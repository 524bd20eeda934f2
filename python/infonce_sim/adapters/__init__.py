"""Adapters: what runs a trainer's loss on one rank (see python/README.md)."""
