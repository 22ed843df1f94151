# The tests run numamig's services in this process, as the daemons do:
# the threading backend, chosen before any test module imports
# oslo_messaging (see numamig._backend).
from numamig import _backend

_backend.select_threading(strict=True)
