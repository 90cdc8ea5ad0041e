"""The one error type for non-compliant or corrupt rumi input."""

from __future__ import annotations


class RumiFormatError(ValueError):
    """A file, blob or frame that breaks a rule of rumi 0.1.0, or is damaged; ``rule`` names the rule.

    >>> str(RumiFormatError("blob.magic", "got 0x00000000"))
    'blob.magic: got 0x00000000'
    """

    def __init__(self, rule: str, detail: str) -> None:
        self.rule = rule
        self.detail = detail
        super().__init__(f"{rule}: {detail}")

    def __reduce__(self):
        # Dask ships errors between processes; keep both fields across pickling.
        return (type(self), (self.rule, self.detail))
