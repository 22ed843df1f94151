"""CPU models between hosts of different CPU generations.

Two nested machines of different ``-cpu`` models (numamig_ci.nested.vm
CPU_MODELS), each with KVM loaded inside, so that the guests of its
libvirtd run under KVM and what they may be given is that machine's CPU
(under TCG every machine offers the same, whatever its CPU: the check
would have nothing to tell apart). Proves what doc/source/cpu-models.rst
claims, on real libvirt and QEMU:

- a guest of the richer host with ``host-model`` (expanded there to
  that host's CPU) is refused for the poorer host by its precheck, with
  the features it lacks named in the migration's error;
- the same guest given the baseline of both hosts (what
  ``numamig-manage host cpu-baseline`` computes: numamig.cpumodel.
  baseline of the hosts' reported CPUs, as ``<cpu>`` XML) moves from the
  richer host to the poorer one and back.
"""

import re

from numamig import cpumodel
from numamig.virt.libvirt import cpu as libvirt_cpu
from numamig_ci.scenarios.registry import scenario

HOST_MODEL_XML = "<cpu mode='host-model' check='partial'/>"


def features_of(cpu):
    """Every feature a HostCPU's host-model expansion gives a guest."""
    return set(cpu.host_model_features) | set(cpu.features)


def richer_first(cpus):
    """Host names, the one whose host-model gives guests most first."""
    return sorted(cpus, key=lambda h: (-len(features_of(cpus[h])), h))


def named_missing(error, candidates):
    """The features of ``candidates`` the error text names."""
    words = set(re.findall(r'[a-z0-9][a-z0-9_.-]*', error.lower()))
    return sorted(candidates & words)


@scenario('cpu-model-generations',
          "Hosts of two CPU generations (nested machines of different "
          "-cpu models, KVM inside): a host-model guest of the richer "
          "host is refused for the poorer one with the missing features "
          "named; a guest with the hosts' baseline CPU (host "
          "cpu-baseline) moves both ways.",
          requires=('cpu_generations',))
def cpu_model_generations(s):
    reports = {r.host: r for r in s.api.compute_node_get_all(s.ctxt)}
    cpus = {h: reports[h].get('cpu') for h in s.backend.hosts}
    s.require(all(cpu is not None and cpu.host_model
                  for cpu in cpus.values()),
              "needs hosts reporting domain capabilities")
    rich, poor = richer_first(cpus)[:2]
    lacking = features_of(cpus[rich]) - features_of(cpus[poor])
    for host in (rich, poor):
        cpu = cpus[host]
        s.say(f"{host}: host CPU {cpu.model}, host-model {cpu.host_model} "
              f"+{len(cpu.host_model_features)} features, "
              f"{len(cpu.custom_models)} usable models")
    s.say(f"{poor} lacks {len(lacking)} of {rich}'s host-model features: "
          f"{', '.join(sorted(lacking)) or 'none'}")
    s.require(lacking or cpus[rich].host_model != cpus[poor].host_model,
              f"{rich} and {poor} offer guests the same CPU")

    guest = s.create(rich, 1, label='cpu-rich')
    s.backend.set_guest_cpu(rich, guest, HOST_MODEL_XML)
    migration = s.migrate(guest, poor)
    error = migration.error or ''
    if migration.status == 'completed':
        s.fail(guest, poor, 'migration status', 'refused (CPU)',
               'completed')
    elif 'cannot run the CPU' not in error:
        s.fail(guest, poor, 'migration error', 'a CPU refusal',
               error[:300])
    else:
        named = named_missing(error, lacking)
        if not named:
            s.fail(guest, poor, 'migration error',
                   f"names one of {', '.join(sorted(lacking)) or '-'}",
                   error[:300])
        else:
            s.say(f"refused naming {', '.join(named)}")
        s.check_placed(guest, rich)

    answer = cpumodel.baseline({h: cpus[h] for h in (rich, poor)})
    if not answer.model:
        s.fail('-', f"{rich}, {poor}", 'cpu-baseline', 'a model',
               answer.note)
        return
    cpu_xml = libvirt_cpu.guest_cpu_xml(cpumodel.GuestCPU(
        cpumodel.MODE_CUSTOM, answer.model, frozenset(answer.features)))
    s.say(f"baseline of {rich} and {poor}: {answer.model} "
          f"+{len(answer.features)} features")
    # The same guest, its CPU now the baseline (the richer host's first
    # layout keeps one dedicated pCPU: room for one pinned guest).
    moving = guest
    s.backend.set_guest_cpu(rich, moving, cpu_xml)
    for dst in (poor, rich):
        migration = s.migrate(moving, dst)
        if not s.expect_status(migration, moving, 'completed'):
            return
        s.check_placed(moving, dst)
