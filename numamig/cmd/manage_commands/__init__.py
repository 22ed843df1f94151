"""Category classes of numamig-manage, one module per category."""
