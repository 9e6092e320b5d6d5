"""kl-patches: one switch for the KL estimator and its placement in verl, OpenRLHF and TRL.

``KLConfig`` describes the regulariser, :mod:`kl_patches.core` computes it,
:mod:`kl_patches.theory` says which gradient it follows, :mod:`kl_patches.oracle` checks that by
exact enumeration, and ``kl_patches.adapters`` translate it for each library. Importing this
package never imports a training library.
"""

from kl_patches.config import KLConfig
from kl_patches.theory import Verdict, verdict

__all__ = ["KLConfig", "Verdict", "__version__", "verdict"]
__version__ = "0.1.0"
