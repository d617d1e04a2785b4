"""Renderers: small modules over the one `Diagnostic` type."""
