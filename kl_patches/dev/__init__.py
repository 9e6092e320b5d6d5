"""Developer tools, not used at run time: the release recorder (``python -m kl_patches.dev``).

The recorder turns one release of a training library into the data files the adapters load
(``kl_patches/adapters/<lib>/data/<release>.json``): the names its configuration accepts with
their defaults, and the functions the patches wrap (where defined, signature, body hash, who
binds them by name). It reads the release's files (the installed distribution when it is that
release, else the wheel from the package index, cached) and never imports the library.
:mod:`.source` finds the files, :mod:`.extract` reads them, :mod:`.record` writes and checks
the data, :mod:`.__main__` is the command line.
"""
