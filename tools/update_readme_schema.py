"""Regenerate the catalog-schema tables in README.md from the pydantic models in hnplan/catalog/schemas/."""

from pathlib import Path

from hnplan.catalog.docs import update_readme

if __name__ == "__main__":
    changed = update_readme(Path(__file__).resolve().parents[1] / "README.md")
    print("README.md updated" if changed else "README.md already current")
