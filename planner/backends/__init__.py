"""State backends: where the state document, its journal and its lock live."""
