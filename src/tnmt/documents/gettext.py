"""gettext catalogues (.po), read and written by `polib`: each message's msgid (and msgid_plural) is translated
into its msgstr (each plural form gets the plural's translation), placeholders (`%s`, `{name}`) kept as written,
comments, references and context kept, and every entry translated by the machine marked `fuzzy`, so that a
translator reviews it before it ships. Entries translated already, obsolete ones and the header are left as
they are."""

import polib

from tnmt.documents.units import Unit, unit
from tnmt.errors import UserError


def read_po(data: str, *, where: str) -> tuple[polib.POFile, list[tuple[polib.POEntry, str]], list[Unit]]:
    """The catalogue, the (entry, "singular" or "plural") each unit fills, and the units to translate.

    Raises:
        UserError: not a gettext catalogue (polib's reason, after `where`).
    """
    try:
        catalogue = polib.pofile(data)
    except (OSError, ValueError) as error:  # polib reads a string that is not a path as the file's text
        raise UserError(f"{where}: not a gettext catalogue ({error})") from None
    places, units = [], []
    for entry in catalogue.untranslated_entries():
        if entry.obsolete or not entry.msgid:
            continue
        places.append((entry, "singular"))
        units.append(unit(entry.msgid))
        if entry.msgid_plural:
            places.append((entry, "plural"))
            units.append(unit(entry.msgid_plural))
    return catalogue, places, units


def write_po(catalogue: polib.POFile, places: list[tuple[polib.POEntry, str]], translations: list[str]) -> str:
    """The catalogue with each place filled by its translation and its entry marked fuzzy."""
    for (entry, form), text in zip(places, translations, strict=True):
        if not entry.msgid_plural:
            entry.msgstr = text
        elif form == "singular":
            entry.msgstr_plural[0] = text
        else:
            forms = max(2, len(entry.msgstr_plural))
            for n in range(1, forms):
                entry.msgstr_plural[n] = text
        if "fuzzy" not in entry.flags:
            entry.flags.append("fuzzy")
    return str(catalogue)
