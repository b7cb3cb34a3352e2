"""make bench report, section s3 (see report.py's SECTIONS): not written yet."""


def section(meta, samples):
    return {"md": [], "targets": [], "json": {}}
