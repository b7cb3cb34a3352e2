"""make bench report, section delta-restore (see report.py's SECTIONS): not written yet."""


def section(meta, samples):
    return {"md": [], "targets": [], "json": {}}
