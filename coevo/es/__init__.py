"""Evolution strategies on model weights: layout-independent noise, ask/tell engine, hosts, history."""
