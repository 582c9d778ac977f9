"""Built-in rules, one per file; discovered by tracelint.engine.registry."""
