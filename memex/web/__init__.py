"""``memex serve``: the archive as a local web view, read-only (docs/web.md).

Layers, top down: :mod:`memex.web.run` (starting it: the archive, the token, the read socket, uvicorn),
:mod:`memex.web.app` (routes, templates, static files), :mod:`memex.web.views` (each page from the read model's
answers, :mod:`memex.read`), :mod:`memex.web.present` and :mod:`memex.web.mail` (how text, files, charts and mail
HTML are shown safely), :mod:`memex.web.security` (the guard every request passes). Nothing here holds SQL or
imports what writes; the web libraries (the ``web`` extra) are imported only when ``memex serve`` runs.
"""
