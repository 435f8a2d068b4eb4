"""The methods, one module per config name; `coevo.run.methods` maps each name to its class."""
