"""The table of scenarios: name -> what it proves and what it needs."""

import dataclasses

from numamig_ci.backends import base

SCENARIOS = {}


@dataclasses.dataclass(frozen=True)
class Scenario:
    """One named whitebox scenario.

    :param requires: backend features (backends.base.FEATURES) without
        which the scenario is reported skipped, with the reason.
    :param func: callable taking a session.Session.
    """

    name: str
    summary: str
    requires: tuple
    func: object

    def missing(self, backend):
        """Why ``backend`` cannot express this scenario, or None."""
        absent = [f for f in self.requires if f not in backend.features]
        if not absent:
            return None
        return (f"the {backend.name} backend has no "
                + ', no '.join(base.FEATURES[f] for f in absent))


def scenario(name, summary, requires=()):
    """Register the decorated function as scenario ``name``."""
    def register(func):
        if name in SCENARIOS:
            raise ValueError(f"scenario {name} registered twice")
        SCENARIOS[name] = Scenario(name, summary, tuple(requires), func)
        return func
    return register


def select(names):
    """The scenarios called ``names`` (all when empty), in table order.

    :raises KeyError: naming the unknown scenario and the known ones.
    """
    unknown = [n for n in names if n not in SCENARIOS]
    if unknown:
        raise KeyError(f"unknown scenario(s) {', '.join(unknown)}; known: "
                       f"{', '.join(SCENARIOS)}")
    if not names:
        return list(SCENARIOS.values())
    return [s for s in SCENARIOS.values() if s.name in names]
