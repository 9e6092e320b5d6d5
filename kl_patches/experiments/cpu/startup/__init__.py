"""The interpreter start-up hook of the OpenRLHF CPU trial (``sitecustomize.py``, this folder
on ``PYTHONPATH`` in that run only)."""
