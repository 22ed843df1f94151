"""CPUPowerState: which of a host's dedicated pCPUs are powered down."""

from oslo_versionedobjects import fields

from numamig.objects import base


@base.register
class CPUPowerCell(base.NumamigObject):
    """One host cell's power-managed pCPUs.

    ``managed``: the cell's dedicated pCPUs power management may touch
    (CPU 0 never). ``powered_down``: those of them it has powered down
    (offline, or on the low governor) because no guest or claim pins
    them.
    """

    # Version 1.0 - Release 2: Initial version
    VERSION = '1.0'

    fields = {
        'id': fields.IntegerField(),
        'managed': fields.SetOfIntegersField(default=set()),
        'powered_down': fields.SetOfIntegersField(default=set()),
    }

    def _validate(self):
        extra = set(self.powered_down) - set(self.managed)
        if extra:
            raise self.invalid(
                f"cell {self.id}: powered_down {sorted(extra)} are not "
                f"managed pCPUs")


@base.register
class CPUPowerState(base.NumamigObject):
    """A host's CPU power management as its agent last applied it.

    ``strategy``: 'off', 'cpu_state' (offline) or 'governor'.
    ``governor_low``: the governor unused pCPUs are on (governor strategy
    only). ``failed``: pCPUs whose state could not be set (the agent's
    log says why); a used one among them had its claim refused.
    """

    # Version 1.0 - Release 2: Initial version
    VERSION = '1.0'

    STRATEGIES = ('off', 'cpu_state', 'governor')

    obj_relationships = {'cells': [('1.0', '1.0')]}

    fields = {
        'strategy': fields.StringField(),
        'governor_low': fields.StringField(nullable=True, default=None),
        'cells': fields.ListOfObjectsField('CPUPowerCell', default=[]),
        'failed': fields.SetOfIntegersField(default=set()),
    }

    def _validate(self):
        if self.strategy not in self.STRATEGIES:
            raise self.invalid(
                f"strategy must be one of {', '.join(self.STRATEGIES)}, "
                f"got {self.strategy!r}")
        ids = [cell.id for cell in self.cells]
        if len(ids) != len(set(ids)):
            raise self.invalid(f"duplicate cell ids {sorted(ids)}")
