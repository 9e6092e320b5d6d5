"""Per-library adapters: each translates :class:`kl_patches.KLConfig` for one library.

Import a library's adapter explicitly (``kl_patches.adapters.trl`` etc.); this package imports
none of them, so that installing kl-patches beside one library never needs the others.
"""
