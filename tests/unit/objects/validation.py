"""Shared shape of the object validation tables.

Each table row builds a valid sample, breaks one invariant with a mutator
and names the fragment validate() must report.
"""

from numamig import exception


def setting(**values):
    """A mutator setting the given fields on the object."""
    def mutate(obj):
        for name, value in values.items():
            setattr(obj, name, value)
    return mutate


def on_cell(index, **values):
    """A mutator setting fields on one cell of a topology."""
    def mutate(topology):
        setting(**values)(topology.cells[index])
    return mutate


class RejectsRows:
    """Mixin for a TestCase whose scenarios are build/mutate/fragment rows."""

    def test_rejected_with_reason(self):
        obj = self.build()
        self.mutate(obj)
        exc = self.assertRaises(exception.ObjectValidationError, obj.validate)
        self.assertIn(self.fragment, str(exc))
