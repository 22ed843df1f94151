"""numamig: NUMA-aware live migration for libvirt/KVM clouds.

Importing the package selects no oslo.service backend and loads no
eventlet: the daemons choose the threading backend in their ``main()``
(numamig._backend says why and when).
"""

import warnings

# futurist imports eventlet (where it is not hidden), which warns on
# import that it is deprecated; numamig never uses eventlet, so the
# warning only confuses operators.
warnings.filterwarnings('ignore', message=r'(?s)\s*Eventlet is deprecated')
