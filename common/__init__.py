"""What every package of the project shares: the user-error type (and the Hub's fixable failures said as one),
the command lines' log format, the builder of ``name:``/``path:`` specs, the "Did you mean ...?" of its errors,
and the rule for a run's best held-out result.

A leaf: it imports nothing from ``recipes``, ``rewards``, ``callbacks`` or ``stats``, and nothing heavy, so
each of them (``stats`` too, which must start in about a second) can use it.
"""

from common import quiet  # noqa: F401  (installs its log filters before peft or TRL are imported)
from common.errors import UserError

__all__ = ["UserError"]
