"""The help plane's settings (entry point `loom.settings`: help), read as
`settings.plane(HelpSettings)`; rendered into docs/configuration.md by `loom config docs`."""

from __future__ import annotations

from loom_core.settings import PlaneSettings
from pydantic import Field


class HelpSettings(PlaneSettings):
    help_docs_dir: str = Field(
        "",
        description="Folder of Markdown pages help.search and help.get index. Empty: the docs this build ships (installed with the loom-help package).",
    )
