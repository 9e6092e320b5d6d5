"""The audit's fixes as edits: what to change in a launch file, in that file's own terms.

:mod:`.change` holds the data model every writer and checker shares (a :class:`Change`, a
:class:`ChangeSet`); the writers that turn a change set into an edited file, and the checks that
run the result through the library's own parser, live in sibling modules.
"""

from kl_patches.audit.fix.change import ACTIONS, LABELS, NAMESPACES, Change, ChangeSet

__all__ = ["ACTIONS", "LABELS", "NAMESPACES", "Change", "ChangeSet"]
