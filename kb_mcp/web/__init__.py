"""``kb-mcp web``: a read-only local web view of the library, for a person.

A thin adapter like the MCP server and the CLI: ``app`` routes each page to one
``Library`` call, ``pages`` turns the redacted result into HTML, ``guard`` holds the
security rules every request passes (Host / Origin, token, GET only, headers), ``paging``
pages a document's lines, ``markup`` renders Markdown safely (and boundedly) and
highlights terms, ``layout`` draws an entity neighbourhood as SVG on the server, ``serve``
binds the socket and runs uvicorn, ``connections`` keeps any one client from holding it
(deadlines, a connection cap). No JavaScript.
"""
