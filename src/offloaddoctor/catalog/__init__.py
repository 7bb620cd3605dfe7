"""The signature catalogue: schema, loading and validation, compiled matchers."""
