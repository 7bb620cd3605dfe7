"""Output formats, one module each; all take a Report and never interpret log text."""
