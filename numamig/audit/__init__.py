"""Audits of what numamig's records claim against what hosts really run.

``placement`` compares a recorded guest placement with the one its
domain XML expresses; ``pins`` audits every guest of a host (pCPUs pinned
twice, pins outside the dedicated set, emulator threads on the wrong set,
XML that differs from the records); ``claims`` finds and heals move
claims that migrations no longer in progress still hold. The functions
take objects and XML text and return findings; fetching them (database,
RPC) is the caller's job, so the rules are unit-testable on their own.
"""
