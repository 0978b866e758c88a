"""Built-in models; see registry.py for how they are registered."""
