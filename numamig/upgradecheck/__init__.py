"""Upgrade checks of a numamig deployment (what ``numamig-status`` runs).

Each check answers one question an operator asks before or after an
upgrade, with the 0/1/2 result codes of nova-status: success, warning
(works, but something is degraded or will break later), failure (act
before relying on NUMA-aware live migration). ``checks.run`` runs them
all; the console script only prints the results.
"""
