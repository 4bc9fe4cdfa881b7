"""Docs from the web: a page or a documentation site as a source (issue 25).

Only a person fetches, through the CLI (``kb-mcp add URL``, ``kb-mcp sync``): no MCP tool
reaches the network, and an agent's ``source_uri`` stays an opaque label. The data flow:

    url.py      what may be asked for: http(s) only, no credentials, one form per page
    net.py      one guarded request: addresses checked after DNS and on every redirect,
                the connection pinned to the checked address, size / time / type limits
    robots.py   robots.txt (RFC 9309) and its sitemaps
    sitemap.py  sitemap and sitemap index files
    extract.py  a page's body → Markdown, title, links, canonical URL
    mirror.py   the source's folder of fetched pages (Markdown files) and its manifest
    crawl.py    the bounded, polite crawl that keeps the mirror fresh

The mirror is an ordinary folder under the home, so the one ingestion path (``ingest/
sync``) reads it as it reads any folder; the manifest gives each file its page URL, which
citations show.
"""
