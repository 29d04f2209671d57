"""Packaged data (icons) from the repository's resources/ folder, through one helper."""

from __future__ import annotations

from pathlib import Path

RESOURCES = Path(__file__).resolve().parents[1] / "resources"


def resource_path(name: str) -> Path | None:
    """The path of resource ``name``, or None when this installation does not carry it."""
    path = RESOURCES / name
    return path if path.is_file() else None
