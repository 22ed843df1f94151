"""The harness's own errors (numamig's are in numamig.exception).

They derive from numamig's bases, so numamig-ci reports them, and a
test matches them, like any numamig error.
"""

from numamig import exception


class CIDeploymentError(exception.NumamigException):
    """The harness's deployment could not be described, started or reached."""
    msg_fmt = "numamig-ci deployment %(what)s: %(reason)s"


class CIDeploymentFileInvalid(exception.Invalid):
    """A --deployment file lacks a setting, names one numamig-ci does not
    know, or holds a value that is unusable or not the deployment's."""
    msg_fmt = "deployment file %(path)s: %(field)s %(reason)s"
