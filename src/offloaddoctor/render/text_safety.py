"""Renderers' name for the escaping that lives below them (offloaddoctor/text_safety.py), where the catalogue
loader uses it too."""

from offloaddoctor.text_safety import inert_json, safe_lines, safe_text

__all__ = ["inert_json", "safe_lines", "safe_text"]
