"""How a request steers its translations, in the fields every API that takes them shares: `/v1/translate` and
the other /v1 routes as JSON, a document's form fields, and LibreTranslate's `glossary` extension."""

from pydantic import BaseModel, ConfigDict

from tnmt.config import ServeConfig
from tnmt.errors import UserError
from tnmt.serve.models import ApiError
from tnmt.translate.glossary import build_glossary
from tnmt.translate.steering import Steering


class GlossaryItem(BaseModel):
    """A glossary entry: where `source` occurs in a text, the translation uses `target` (or one of its forms)."""

    model_config = ConfigDict(extra="forbid")
    source: str
    target: str | list[str]


class SteeringFields(BaseModel):
    """How a request steers its translations (translate/steering.py); every text of the request gets the same."""

    model_config = ConfigDict(extra="forbid")
    glossary: list[GlossaryItem] = []
    do_not_translate: list[str] = []
    constraints: list[str | list[str]] = []
    avoid: list[str] = []
    prefix: str = ""

    def steering(self, config: ServeConfig) -> Steering | None:
        """The request's `Steering`, None when it steers nothing.

        Raises:
            ApiError: 413 over `max_glossary` entries in all; 422 an entry that is empty or malformed (named).
        """
        entries = len(self.glossary) + len(self.do_not_translate) + len(self.constraints) + len(self.avoid)
        if entries > config.max_glossary:
            raise ApiError(
                413,
                f"{entries} glossary, do_not_translate, constraints and avoid entries:"
                f" over max_glossary={config.max_glossary}",
            )
        longest = max(
            [len(self.prefix), *(len(t) for t in self.do_not_translate), *(len(t) for t in self.avoid)], default=0
        )
        if longest > config.max_chars:
            raise ApiError(413, f"a steering entry has {longest} characters: over max_chars={config.max_chars}")
        if not (self.glossary or self.do_not_translate or self.constraints or self.avoid or self.prefix):
            return None
        try:
            glossary = tuple(build_glossary([(g.source, g.target) for g in self.glossary]))
        except UserError as error:  # (a conflict stays one for LibreTranslate's extension: the error is kept)
            raise ApiError(422, str(error)) from error
        for name, terms in (("do_not_translate", self.do_not_translate), ("avoid", self.avoid)):
            for n, term in enumerate(terms):
                if not term.strip():
                    raise ApiError(422, f"{name}[{n}]: an empty term")
        include = tuple((c,) if isinstance(c, str) else tuple(c) for c in self.constraints)
        for n, forms in enumerate(include):
            if not forms or any(not form.strip() for form in forms):
                raise ApiError(422, f"constraints[{n}]: an empty phrase")
        return Steering(glossary, tuple(self.do_not_translate), include, tuple(self.avoid), self.prefix)
