"""Base test case: isolated configuration, fatal message-format errors."""

import fixtures
from oslo_config import fixture as config_fixture
import testtools

from numamig import exception
from numamig.conf import CONF


class TestCase(testtools.TestCase):
    """Every numamig test derives from this.

    Configuration changes go through ``self.flags`` and are undone after
    the test; an exception whose message does not match its keyword
    arguments fails the test instead of being logged.
    """

    def setUp(self):
        super().setUp()
        self.conf = self.useFixture(config_fixture.Config(CONF))
        self.conf.config(state_path=self.useFixture(
            fixtures.TempDir()).path)
        self.useFixture(fixtures.MonkeyPatch(
            'numamig.exception.NumamigException.FATAL_FORMAT_ERRORS', True))

    def flags(self, group=None, **kwargs):
        """Override configuration options for this test only."""
        self.conf.config(group=group, **kwargs)

    def assertRaisesMessage(self, exc_class, fragment, func, *args,  # noqa: N802
                            **kw):
        """Assert ``func`` raises ``exc_class`` whose text has ``fragment``."""
        exc = self.assertRaises(exc_class, func, *args, **kw)
        self.assertIn(fragment, str(exc))
        return exc


__all__ = ['TestCase', 'exception']
