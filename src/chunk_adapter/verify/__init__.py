"""``chunk-adapter verify``: run the whole suite against one adapter, get a verdict.

Use :func:`verify` from Python, or the command line. :func:`check_adapter` is
the one call for a user's own test file: it raises ``ContractViolation`` with
the report when the adapter breaks the contract, and ``VerificationInconclusive``
when some check could not decide.
"""

from ..profiles import PROFILES
from .api import ContractViolation, VerificationInconclusive, check_adapter
from .report import VerifyReport
from .result import RULES, CheckResult
from .runner import UsageError, verify
from .stages import STAGES

__all__ = [
    "PROFILES",
    "RULES",
    "STAGES",
    "CheckResult",
    "ContractViolation",
    "UsageError",
    "VerificationInconclusive",
    "VerifyReport",
    "check_adapter",
    "verify",
]
