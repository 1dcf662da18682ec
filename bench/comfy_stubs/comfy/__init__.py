"""Stub package ``comfy`` for bench/dropin_clients.py (see bench/comfy_stubs/README.md)."""
