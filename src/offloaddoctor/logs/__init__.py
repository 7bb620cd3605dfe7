"""Reading log sources and normalising their lines."""
