"""Loading run configuration from every place it lives, with provenance."""
