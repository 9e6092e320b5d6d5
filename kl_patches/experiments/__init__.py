"""The evidence kl-patches produces about itself, runnable from the command line.

:mod:`.bias` (exact and Monte-Carlo bias of each configuration, ``kl-patches bias``),
:mod:`.reproduce` with :mod:`.reproduce_train` and :mod:`.reproduce_report` (the paper's
comparison in miniature, ``kl-patches reproduce``), :mod:`.demo` (the built-in example,
``kl-patches demo``), :mod:`.docs_gen` (the generated parts of the docs) and :mod:`.progress`
(a dependency-free progress bar). They build on the kernel only, and on the audit for the demo.
"""
