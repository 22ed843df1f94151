"""numamig-ci: a third-party CI harness that proves NUMA live migration.

A public API can only say that a migration succeeded; whether the guest
was really re-pinned for its destination shows only inside the hosts.
The harness creates guests through numamig, migrates them, and reads
back the live and persistent domain XML on both hosts, numamig's records
and each host's reported topology, before and after every migration.

Modules: ``results`` (what a check found), ``checks`` (the whitebox
comparisons, pure), ``domain`` (domain XML -> placement), ``backends``
(where the guests run: embedded, local libvirtd hosts, an existing
deployment), ``session`` (one scenario's guests and observations),
``scenarios`` (the registry), ``cases`` (each scenario as a testtools
test case), ``runner`` and ``reporters`` (human, subunit v2, JUnit XML),
``suite`` (the cases for stestr), ``libvirt_hosts`` (libvirtd hosts
side by side),
``local_deployment`` (those hosts with a conductor and agents as
processes: --local-libvirt and the --deployment tests), ``nested`` (the
same inside nested multi-NUMA QEMU machines: --nested; its ``image``
recipe, ``vm``, the ``agent`` inside and the ``deployment``), and
``deployment_file`` (the --deployment file, checked up front) and
``broker`` (a run's queues removed afterwards).
"""
