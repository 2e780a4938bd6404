"""Typer's rich help in a narrow terminal: long option names fold instead of being cut."""

from __future__ import annotations

from typer.core import TyperCommand, TyperGroup


def long_words_fold_in_help() -> None:
    """Make typer's rich help fold an option name too long for its column instead of cutting it.

    In a terminal of 80 columns typer 0.29's options table leaves the name column narrower than the longest
    names and rich ends them with an ellipsis (``--global-batch-t…``), so the flag cannot be read or copied.
    Typer styles every option name and help text with its module's ``highlighter``; wrapped so that the text it
    returns folds (``--global-batch-to`` / ``kens`` on the next line), nothing is lost. Patched when a help is
    first formatted (``rich_utils`` imports rich, which a command that runs without ``--help`` does not need);
    a typer without those names is left alone.
    """
    for cls in (TyperCommand, TyperGroup):
        shown = getattr(cls, "format_help", None)
        if shown is None or getattr(shown, "_hnplan_folds", False):
            continue

        def format_help(self, ctx, formatter, _shown=shown):
            _fold_highlighters()
            return _shown(self, ctx, formatter)

        format_help._hnplan_folds = True  # type: ignore[attr-defined]
        cls.format_help = format_help  # type: ignore[method-assign]


def _fold_highlighters() -> None:
    """Wrap ``typer.rich_utils``' option and text highlighters so that the Text they return folds (once)."""
    import typer.rich_utils as ru

    for name in ("highlighter", "negative_highlighter"):
        h = getattr(ru, name, None)
        if h is None or getattr(h, "_hnplan_folds", False):
            continue

        class Folding(type(h)):  # type: ignore[misc]
            _hnplan_folds = True

            def __call__(self, *args, **kwargs):
                text = super().__call__(*args, **kwargs)
                text.overflow = "fold"
                return text

        setattr(ru, name, Folding())
