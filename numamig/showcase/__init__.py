"""Human-readable pictures of NUMA hosts and guests, and the main job.

``pictures`` draws host cells and guest placements as compact text (used
by ``numamig-manage host show`` and the main job alike); ``scenario``
builds the embedded deployment and guests of the main job; ``job`` runs
it and prints what happened.
"""
