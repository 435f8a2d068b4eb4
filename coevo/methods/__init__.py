"""The methods, one module per config name; `coevo.run.method_registry` maps each name to its class."""
