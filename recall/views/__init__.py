"""Recall's pages, one module per page.

The slots where these pages take panels of the apps above (``portal.pages.panel_register``)
are named here, so that a registering app need not import a page's module.
"""

MEMORY_SIDE = "recall.memory.side"  # the memory page, beside its fields
MEMORY_AFTER = "recall.memory.after"  # the memory page, under everything
