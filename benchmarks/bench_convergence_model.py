"""Compare convergence policies on the modelled pre-copy (no hypervisor).

    PYTHONPATH=. .venv/bin/python benchmarks/bench_convergence_model.py

MODELLED, not measured on a hypervisor: numamig.convergence.emulated
runs the same policy engine the libvirt monitor runs, on a model of
pre-copy passes (see that module). For each guest (1 GiB; idle; a 20 MiB
working set dirtied at 400 MiB/s, which needs 200 ms of downtime at
100 MiB/s; dirtying 150 MiB/s, faster than the link) it prints, per
policy, the outcome, the modelled total time, the final downtime and
the bytes sent. The baseline is the timer policy with the default
[libvirt] options, modelled in the same run. Targets (issue 19): an
iteration-aware policy ends where the timer times out, and is never
slower than the timer on the idle guest.
"""

from numamig.convergence import emulated
from numamig.convergence import policy as pol

MIB = 2 ** 20
GIB = 2 ** 30
BANDWIDTH = 100 * MIB
# The [libvirt] defaults for a 1 GiB guest: 500 ms in 10 steps 75 s
# apart, completion timeout 800 s, then abort.
TIMER = emulated.Timer(steps=tuple((75 * i, int(50 + 45 * i))
                                   for i in range(11)), timeout_s=800)
GUESTS = (('idle', 0, None), ('working set 20 MiB', 400 * MIB, 20 * MIB),
          ('dirtier than the link', 150 * MIB, None))


def main():
    failures = []
    print(f"{'guest':<24}{'policy':<13}{'outcome':<11}{'time s':>9}"
          f"{'downtime ms':>13}{'sent MiB':>10}")
    for label, dirty, working_set in GUESTS:
        timer = None
        for name in (pol.TIMER, pol.NFV, pol.FINISH, pol.NEVER_PAUSE):
            out = emulated.run(pol.SHIPPED[name], GIB, dirty, BANDWIDTH,
                               timer=TIMER, timeout_s=800,
                               working_set=working_set)
            print(f"{label:<24}{name:<13}{out.outcome:<11}"
                  f"{out.elapsed_s:>9.1f}{str(out.downtime_ms):>13}"
                  f"{out.bytes_sent / MIB:>10.0f}")
            if name == pol.TIMER:
                timer = out
                continue
            if timer.outcome == emulated.ABORTED and \
                    out.outcome == emulated.ABORTED:
                failures.append(f"{label}: {name} also fails")
            if label == 'idle' and out.elapsed_s > timer.elapsed_s:
                failures.append(f"idle: {name} slower than the timer")
    print("target (ends where the timer times out; never slower on the "
          "idle guest):", 'met' if not failures else
          'NOT met: ' + '; '.join(failures))


if __name__ == '__main__':
    main()
