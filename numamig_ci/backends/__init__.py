"""Where the harness's guests run: embedded, local libvirtd, a deployment."""
