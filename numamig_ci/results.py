"""What the harness found: one failed check; a scenario that cannot run.

A failure always names the guest, the host, the XML element (or record
field) and the expected and actual values, so that a CI log line alone
tells a vendor what their deployment did wrong.
"""

import dataclasses


@dataclasses.dataclass(frozen=True)
class Failure:
    """One check that did not hold.

    :param element: where the value was read: an XML element such as
        ``<vcpupin vcpu='0'>``, or a record field such as
        ``record numa_topology.cpu_pinning``.
    """

    guest: str
    host: str
    element: str
    expected: str
    actual: str
    note: str = ''

    def __str__(self):
        text = (f"guest {self.guest} on host {self.host}: {self.element}: "
                f"expected {self.expected}, actual {self.actual}")
        return f"{text} ({self.note})" if self.note else text


class ScenarioSkipped(Exception):
    """Raised by a scenario that this backend cannot express."""

    def __init__(self, reason):
        super().__init__(reason)
        self.reason = reason


def brief(exc):
    """The first line of an error: remote errors carry the peer's
    traceback after it, which a verdict line does not need."""
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else type(exc).__name__
