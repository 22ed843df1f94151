"""Whether a host's CPU can run a guest's CPU, and a model several can run.

Live migration between hardware generations most often breaks on the
guest's CPU: a guest started with a model or features the destination's
CPU lacks cannot be resumed there. This module holds the pure rules the
scheduler, the destination's precheck (when its libvirt cannot compare
for it) and ``numamig-manage host cpu-baseline`` share. A leaf module:
no numamig imports, no I/O, so the conductor, the agents and the tests
read the same answer.

A host is described by what its agent reports (objects.HostCPU, or any
object with the same attributes): the host CPU of libvirt's host
capabilities (``model``, ``features``) and the domain capabilities'
host-model expansion (``host_model``, ``host_model_features``,
``host_model_disabled``) and usable custom models (``custom_models``,
``model_blockers``). A guest is described by its CPU definition as it
would migrate (GuestCPU).

Where the answer is exact and where not:

* host-passthrough: exact. The guest sees the source's host CPU, so the
  destination needs the same model and every feature the source's host
  CPU lists.
* custom or host-model (migrated as the expanded custom model): the
  model must be usable on the destination (domain capabilities), and a
  feature the guest requires must not be one the destination disables.
  When the guest's model is the destination's host-model, every feature
  beyond that model is listed, so a missing one is certain. When the
  models differ, a feature the destination's model includes is not
  listed by libvirt, so such a feature is not judged here (it is never
  refused on doubt); libvirt's compareHypervisorCPU at the destination
  decides it.
* Not seen at all: microcode and firmware differences behind the same
  model name, and features the hypervisor filters (libvirt's own
  check).
"""

import dataclasses

MODE_PASSTHROUGH = 'host-passthrough'
MODE_HOST_MODEL = 'host-model'
MODE_CUSTOM = 'custom'
MODE_MAXIMUM = 'maximum'
MODES = (MODE_PASSTHROUGH, MODE_HOST_MODEL, MODE_CUSTOM, MODE_MAXIMUM)


@dataclasses.dataclass(frozen=True)
class GuestCPU:
    """A guest's CPU as it migrates.

    :param mode: one of MODES, or None for a guest without ``<cpu
        mode>`` (the hypervisor's default model: runs wherever the
        architecture is the same).
    :param model: the CPU model name (for host-passthrough, the source
        host's model, filled in by the source).
    :param features: features the guest requires (policy require or
        force; for host-passthrough, the source host CPU's features).
    :param disabled: features the guest must not have (disable, forbid).
    """

    mode: str = None
    model: str = None
    features: frozenset = frozenset()
    disabled: frozenset = frozenset()

    def describe(self):
        """One line an operator reads: mode, model, feature count."""
        if self.mode is None:
            return "the hypervisor's default CPU"
        parts = [self.mode]
        if self.model:
            parts.append(self.model)
        if self.features:
            parts.append(f"+{len(self.features)} features")
        return ' '.join(parts)


@dataclasses.dataclass(frozen=True)
class Compatibility:
    """The answer for one host.

    :param runs: True (it can), False (it cannot: ``reason`` says why and
        ``missing`` names the features), None (the host reported no CPU:
        an older agent; callers treat it as a pass, never a refusal).
    """

    runs: bool
    reason: str = None
    missing: tuple = ()

    @property
    def refused(self):
        return self.runs is False


UNKNOWN = Compatibility(None, "the host reported no CPU (an older agent)")
RUNS = Compatibility(True)


def _features(host, name):
    return frozenset(getattr(host, name, None) or ())


def _offered(host):
    """The features a guest of a named model can be given here: the
    domain capabilities' host-model expansion where the host has one.
    The host capabilities' features are the machine's, not what its
    hypervisor gives guests (under TCG most of them are not), so they
    stand in only where there are no domain capabilities."""
    if getattr(host, 'host_model', None):
        return _features(host, 'host_model_features')
    return _features(host, 'features')


def _missing(names):
    return tuple(sorted(names))


def _listed(missing):
    return ', '.join(missing)


def compatibility(guest, host):
    """Whether ``host`` (a reported HostCPU or None) can run ``guest``.

    :returns: Compatibility; never raises for a well-formed host.
    """
    if host is None:
        return UNKNOWN
    if guest is None or guest.mode is None:
        return RUNS
    if guest.mode in (MODE_PASSTHROUGH, MODE_MAXIMUM):
        return _passthrough(guest, host)
    return _custom(guest, host)


def _passthrough(guest, host):
    host_features = _features(host, 'features')
    missing = _missing(guest.features - host_features)
    if guest.model and host.model and guest.model != host.model:
        reason = (f"{guest.mode} guest needs host CPU model {guest.model}, "
                  f"this host's is {host.model}")
        if missing:
            reason += f"; missing features: {_listed(missing)}"
        return Compatibility(False, reason, missing)
    if missing:
        return Compatibility(
            False, f"{guest.mode} guest of CPU model "
                   f"{guest.model or 'unknown'} needs features this host's "
                   f"CPU lacks: "
                   f"{_listed(missing)}", missing)
    return RUNS


def _custom(guest, host):
    usable = _features(host, 'custom_models')
    blockers = dict(getattr(host, 'model_blockers', None) or {})
    if guest.model and (usable or blockers) and guest.model not in usable:
        missing = _missing(blockers.get(guest.model) or ())
        if guest.model in blockers:
            reason = f"CPU model {guest.model} is not usable here"
            if missing:
                reason += f": missing features: {_listed(missing)}"
        else:
            reason = f"CPU model {guest.model} is unknown to this host"
        return Compatibility(False, reason, missing)
    disabled = _features(host, 'host_model_disabled')
    missing = set(guest.features & disabled)
    if guest.model and guest.model == getattr(host, 'host_model', None):
        # Same model: every feature beyond it is listed, so one not
        # listed is certainly absent.
        missing |= guest.features - _offered(host)
    if missing:
        missing = _missing(missing)
        return Compatibility(
            False, f"CPU model {guest.model} with features this host's "
                   f"CPU lacks: {_listed(missing)}", missing)
    return RUNS


@dataclasses.dataclass(frozen=True)
class Baseline:
    """A CPU model all the given hosts can run.

    :param model: the model, or None when no model is usable on all.
    :param features: features to require on top of it.
    :param common_models: every model usable on all the hosts.
    :param note: why no model was chosen, or how it was.
    """

    model: str
    features: tuple
    common_models: tuple
    note: str


def has_domain_capabilities(cpu):
    """Whether ``cpu`` (a HostCPU) carries libvirt's domain capabilities:
    a host-model or a usable custom model. Without them (libvirt's test
    driver, a hypervisor that does not answer) only the host CPU itself
    is known."""
    return bool(cpu.host_model or cpu.custom_models)


def baseline(hosts):
    """A CPU model and features every host of ``hosts`` can run.

    Conservative: a feature is required only if every host offers it
    to guests (listed beyond its host-model); a feature implied by one
    host's model
    but not listed is left out, so the answer may be poorer than the
    hosts allow, never richer. The model is the host-model of the most
    hosts among those usable on all (ties by name).

    :param hosts: {host name: HostCPU}; at least one, each with a CPU.
    :raises ValueError: no host, or a host without a CPU report.
    """
    if not hosts:
        raise ValueError("no hosts given")
    unknown = sorted(name for name, cpu in hosts.items() if cpu is None)
    if unknown:
        raise ValueError(f"no CPU reported by {', '.join(unknown)} (an "
                         f"older agent, or one not reporting yet)")
    cpus = list(hosts.values())
    common = frozenset.intersection(
        *(_features(cpu, 'custom_models') for cpu in cpus))
    features = frozenset.intersection(*(_offered(cpu) for cpu in cpus))
    features -= frozenset().union(
        *(_features(cpu, 'host_model_disabled') for cpu in cpus))
    votes = {}
    for cpu in cpus:
        if cpu.host_model in common:
            votes[cpu.host_model] = votes.get(cpu.host_model, 0) + 1
    if not votes:
        blind = sorted(name for name, cpu in hosts.items()
                       if not has_domain_capabilities(cpu))
        if blind:
            # Nothing to choose from is not the same as nothing shared:
            # say which hosts gave libvirt's answer no models at all.
            note = (f"no domain capabilities (host-model, usable models) "
                    f"reported by {', '.join(blind)}; libvirt's test "
                    f"driver has none")
        elif common:
            note = "no host's host-model is usable on all of them"
        else:
            note = "no custom model is usable on all of them"
        return Baseline(None, tuple(sorted(features)), tuple(sorted(common)),
                        note)
    model = min(votes, key=lambda name: (-votes[name], name))
    return Baseline(model, tuple(sorted(features)), tuple(sorted(common)),
                    f"host-model of {votes[model]} of {len(cpus)} hosts")
