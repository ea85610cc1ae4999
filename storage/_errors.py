"""The one exception type the storage layer raises for problems a user can fix."""

from __future__ import annotations


class StorageError(Exception):
    """A storage location cannot be used; the message says where, why, and what to do.

    ``url`` is the location involved (when known) so callers can show or group it
    without parsing the message.
    """

    def __init__(self, message: str, *, url: str | None = None) -> None:
        super().__init__(message)
        self.url = url

    def __reduce__(self) -> tuple[type[StorageError], tuple[str], dict[str, str | None]]:
        # Keep ``url`` when the error crosses a process boundary (actors pickle their errors).
        return (type(self), (str(self),), {"url": self.url})
