"""``kl-patches audit``: which KL gradient a real verl, OpenRLHF or TRL setup follows, and the fix.

Layers, each a module: :mod:`.model` (the data types), :mod:`.shell` (a bash-faithful reader
of launch scripts that runs nothing), :mod:`.inputs` (where the launches are in a file or an
argv), :mod:`.findings` (the library-independent findings and statuses), :mod:`.ignored`
(keys no reader used), :mod:`.run` (reading through the adapters and auditing) and
:mod:`.report` (text and JSON). The command line is :mod:`kl_patches.cli.audit`.
"""

from __future__ import annotations

from kl_patches.audit.model import (
    STATUSES,
    AuditEntry,
    AuditError,
    AuditFinding,
    AuditInput,
    InputError,
)
from kl_patches.audit.run import (
    audit,
    audit_input,
    audit_installed,
    audit_reading,
    launched_reading,
    reader_for,
)

__all__ = [
    "STATUSES",
    "AuditEntry",
    "AuditError",
    "AuditFinding",
    "AuditInput",
    "InputError",
    "audit",
    "audit_input",
    "audit_installed",
    "audit_reading",
    "launched_reading",
    "reader_for",
]
