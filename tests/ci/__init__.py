"""CI: the example pipelines run step by step, their linting, and packaging."""
