"""The jinja2 environment of the HTML templates in workflow/render/templates/: Python
computes a page's values, a template lays them out. Autoescaped and strict: every value
is escaped, and a name the caller did not pass is an error, never an empty string."""

from __future__ import annotations

from html import escape

from jinja2 import Environment, PackageLoader, StrictUndefined
from markupsafe import Markup


def _escape(value) -> Markup:
    """Escapes a value with the standard library's entities (&quot;, &#x27;), which the
    pages have always had, where markupsafe writes &#34;, &#39;: a report must not change
    byte for byte when only its renderer did. Markup (a macro's output) is already HTML."""
    return value if isinstance(value, Markup) else Markup(escape(str(value)))


ENV = Environment(
    loader=PackageLoader("workflow.render", "templates"),
    autoescape=True,
    undefined=StrictUndefined,
    # Applied to every {{ value }} before autoescaping, which leaves its Markup alone.
    finalize=_escape,
    # Block tags on lines of their own leave no blank line behind.
    trim_blocks=True,
    lstrip_blocks=True,
    keep_trailing_newline=True,
)


def render(name: str, **values) -> str:
    return ENV.get_template(name).render(**values)
