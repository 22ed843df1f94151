"""Destination scheduling for the conductor.

``host_state`` caches hosts' reports with in-flight reservations,
``fingerprint`` computes guest-set fingerprints that tell when a report
already counts those reservations, ``filters`` and ``weighers`` decide and
order, ``scheduler`` puts them together, ``nrt`` exports a host as a
NodeResourceTopology document.
"""
