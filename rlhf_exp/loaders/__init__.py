"""Loading strategies: one module each, declared in registry.py (the only list of them)."""
