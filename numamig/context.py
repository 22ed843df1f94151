"""The request context numamig passes along RPC calls."""

from oslo_context import context


class RequestContext(context.RequestContext):
    """oslo.context's context; numamig adds nothing yet but a name."""


def get_admin_context():
    """A context for work the services start themselves (periodic tasks)."""
    return RequestContext(is_admin=True, overwrite=False)
