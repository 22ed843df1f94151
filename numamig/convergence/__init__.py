"""How a live migration converges, as pure decisions (no I/O).

``policy`` holds the operator's convergence policies (named schedules of
downtime steps and escalation tiers) and the engine that, given the job
statistics a migration reported so far, says what to do next; the
libvirt monitor only reads statistics and applies those decisions.
``emulated`` produces the same statistics for the embedded tier's
emulated migrations, so stalls can be exercised end to end without a
hypervisor that migrates.
"""
